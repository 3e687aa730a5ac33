"""Sessions that outlive a process: an agent's state in a store, saved as it replies.

* :class:`SessionStore` -- the protocol: ``load``, ``save`` with a version check (the loser of
  two concurrent saves gets :class:`SessionConflictError`), ``list``, ``delete``; a stored
  record that cannot be read is a :class:`SessionCorruptError` and is never written over.
* :class:`SQLiteSessionStore` -- one SQLite file, the embedded default.
* :class:`RedisSessionStore` -- Redis, for many workers (the ``redis`` extra).
* :class:`SessionMiddleware` -- loads the session before a reply, saves when it ends or parks.
"""

from ._middleware import SessionMiddleware as SessionMiddleware
from ._redis import RedisSessionStore as RedisSessionStore
from ._sqlite import SQLiteSessionStore as SQLiteSessionStore
from ._store import (
    SessionConflictError as SessionConflictError,
    SessionCorruptError as SessionCorruptError,
    SessionStore as SessionStore,
    SessionStoreError as SessionStoreError,
    StoredSession as StoredSession,
)

__all__ = [
    "RedisSessionStore",
    "SQLiteSessionStore",
    "SessionConflictError",
    "SessionCorruptError",
    "SessionMiddleware",
    "SessionStore",
    "SessionStoreError",
    "StoredSession",
]
