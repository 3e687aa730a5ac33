"""``RedisSessionStore``: sessions in Redis, for many processes on many hosts.

Built on ``coredis`` (the ``redis`` extra: ``pip install 'trioagent[redis]'``), which runs
under Trio.  Each session is a hash (``version``, ``payload``, ``updated_at``) and a sorted
set lists the names; the version check and the write are one Lua script, so they are atomic
on the server.  The script refuses a record it cannot read (a key of another type, a version
that is not a whole number, a missing field): it is a :class:`SessionCorruptError`, and only
a delete without ``expected_version`` removes it.  A save or delete runs shielded from
cancellation, bounded by ``timeout``: a command is never cut off halfway on its connection.
If the bound itself runs out, the outcome is unknown, and a later save reports a conflict
rather than overwrite anything.
"""

from __future__ import annotations

import builtins
import contextlib
from typing import TYPE_CHECKING, Any

import trio

from .._core.ids import generate_timestamp
from ..agent import AgentState
from ..exception import MissingExtraError
from ._store import (
    SessionConflictError,
    SessionCorruptError,
    SessionStoreError,
    StoredSession,
    check_session_id,
    check_version,
    decode_state,
    encode_state,
    stored_version,
)

if TYPE_CHECKING:
    import coredis

__all__ = ["RedisSessionStore"]

#: ``stored_version(key)``: the version (0: no session), or nil and what is wrong with the
#: record.  The same rules as ``stored_version`` in Python: digits only, from 1.
_STORED_VERSION = """
local function stored_version(key)
  local kind = redis.call('TYPE', key).ok
  if kind == 'none' then return 0 end
  if kind ~= 'hash' then return nil, 'the key holds a ' .. kind .. ', not a hash' end
  local version = redis.call('HGET', key, 'version')
  local has_payload = redis.call('HEXISTS', key, 'payload') == 1
  if not version and not has_payload then return 0 end
  if not version then return nil, 'its version is missing' end
  if not has_payload then return nil, 'its payload is missing' end
  if not string.match(version, '^[0-9]+$') or #version > 15 or tonumber(version) < 1 then
    return nil, 'its version ' .. string.sub(version, 1, 40) .. ' is not a whole number from 1'
  end
  return tonumber(version)
end
"""

# Each script answers {1, n} (done), {0, current} (a conflict) or {-1, problem} (damaged).
_VERSION = (
    _STORED_VERSION
    + """
local current, problem = stored_version(KEYS[1])
if not current then return {-1, problem} end
return {1, current}
"""
)

_SAVE = (
    _STORED_VERSION
    + """
local current, problem = stored_version(KEYS[1])
if not current then return {-1, problem} end
if current ~= tonumber(ARGV[1]) then return {0, current} end
redis.call('HSET', KEYS[1], 'version', current + 1, 'payload', ARGV[2], 'updated_at', ARGV[3])
redis.call('ZADD', KEYS[2], 0, ARGV[4])
return {1, current + 1}
"""
)

_DELETE = (
    _STORED_VERSION
    + """
if ARGV[1] ~= '' then
  local current, problem = stored_version(KEYS[1])
  if not current then return {-1, problem} end
  if current ~= tonumber(ARGV[1]) then return {0, current} end
end
local existed = redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[2])
return {1, existed}
"""
)


def _answer(session_id: str, answer: Any) -> tuple[bool, int]:
    """A script's answer: whether it did it, and the number; a damaged record raises."""
    status, value = answer
    if int(status) < 0:
        text = value.decode(errors="replace") if isinstance(value, bytes) else str(value)
        raise SessionCorruptError(session_id, text)
    return int(status) == 1, int(value)


class RedisSessionStore:
    """Sessions in the Redis server at ``url`` (``redis://host:port/db``, ``rediss://`` for
    TLS, ``unix:///path/to/socket``), or through a ``coredis.Redis`` client you opened.

    Use it as an async context manager, which opens (and then closes) its connection pool::

        async with RedisSessionStore("redis://localhost:6379/0") as store:
            ...

    Args:
        url: where the server is (credentials in the URL are never shown in a repr or an
            error).
        client: an entered ``coredis.Redis`` (then ``url`` is not given; you close it).
        namespace: the prefix of every key this store writes.
        timeout: seconds a save or delete may take while shielded from cancellation.
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        client: coredis.Redis[bytes] | None = None,
        namespace: str = "trioagent:session",
        timeout: float = 10.0,
    ) -> None:
        if (url is None) == (client is None):
            raise TypeError("RedisSessionStore needs exactly one of url= and client=")
        if not namespace:
            raise ValueError("namespace must not be empty")
        self._url = url
        self._client = client
        self._namespace = namespace
        self._timeout = timeout
        self._stack: contextlib.AsyncExitStack | None = None

    def __repr__(self) -> str:
        # The URL may carry a password: only the namespace is shown.
        return f"<RedisSessionStore namespace={self._namespace!r}>"

    async def __aenter__(self) -> RedisSessionStore:
        if self._url is not None and self._stack is None:
            try:
                import coredis
            except ImportError as exc:
                raise MissingExtraError("RedisSessionStore", "redis", module="coredis") from exc
            stack = contextlib.AsyncExitStack()
            try:
                client: coredis.Redis[bytes] = coredis.Redis.from_url(
                    self._url, decode_responses=False
                )
                await stack.enter_async_context(client)
            except BaseException:
                await stack.aclose()
                raise
            self._client, self._stack = client, stack
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        stack, self._stack = self._stack, None
        if stack is not None:
            self._client = None
            await stack.aclose()

    # -- keys ---------------------------------------------------------------------------------------

    def _key(self, session_id: str) -> str:
        return f"{self._namespace}:s:{session_id}"

    @property
    def _index(self) -> str:
        return f"{self._namespace}:sessions"

    def _redis(self) -> coredis.Redis[bytes]:
        if self._client is None:
            raise SessionStoreError(
                "RedisSessionStore is not open: use it as `async with RedisSessionStore(url)`"
            )
        return self._client

    async def _call(self, what: str, coro: Any, session_id: str | None = None) -> Any:
        try:
            return await coro
        except (SessionStoreError, trio.Cancelled):
            raise
        except Exception as exc:
            if type(exc).__module__.split(".")[0] != "coredis" and not isinstance(exc, OSError):
                raise
            from coredis.exceptions import WrongTypeError  # installed: a client exists

            if session_id is not None and isinstance(exc, WrongTypeError):
                raise SessionCorruptError(session_id, "its key is not a hash") from exc
            raise SessionStoreError(f"Redis session store ({what}): {exc}") from exc

    async def _shielded(self, what: str, coro_fn: Any) -> Any:
        with trio.CancelScope(shield=True) as scope:
            # Shielded so a write is never cut off halfway; bounded by self._timeout.
            scope.deadline = trio.current_time() + self._timeout
            result = await self._call(what, coro_fn())
        if scope.cancelled_caught:
            raise SessionStoreError(f"Redis session store ({what}): no answer in {self._timeout}s")
        return result

    # -- the protocol ---------------------------------------------------------------------------------

    async def load(self, session_id: str) -> StoredSession | None:
        check_session_id(session_id)
        redis = self._redis()
        version, payload = await self._call(
            "load", redis.hmget(self._key(session_id), ["version", "payload"]), session_id
        )
        if version is None and payload is None:
            return None
        if payload is None:
            raise SessionCorruptError(session_id, "its payload is missing")
        if version is None:
            raise SessionCorruptError(session_id, "its version is missing")
        state = decode_state(session_id, bytes(payload))
        return StoredSession(session_id, stored_version(session_id, version), state)

    async def version(self, session_id: str) -> int:
        check_session_id(session_id)
        script = self._redis().register_script(_VERSION)
        answer = await self._call("version", script(keys=[self._key(session_id)]))
        return _answer(session_id, answer)[1]

    async def save(self, session_id: str, state: AgentState, *, expected_version: int) -> int:
        check_session_id(session_id)
        check_version(expected_version)
        payload = encode_state(state)
        script = self._redis().register_script(_SAVE)
        keys = [self._key(session_id), self._index]
        args: list[str | bytes] = [str(expected_version), payload, generate_timestamp(), session_id]
        answer = await self._shielded("save", lambda: script(keys=keys, args=args))
        done, version = _answer(session_id, answer)
        if not done:
            raise SessionConflictError(session_id, expected_version, version)
        return version

    async def list(self) -> builtins.list[str]:
        names = await self._call("list", self._redis().zrange(self._index, 0, -1))
        return sorted(n.decode() if isinstance(n, bytes) else str(n) for n in names)

    async def delete(self, session_id: str, *, expected_version: int | None = None) -> bool:
        check_session_id(session_id)
        if expected_version is not None:
            check_version(expected_version)
        script = self._redis().register_script(_DELETE)
        keys = [self._key(session_id), self._index]
        expected = "" if expected_version is None else str(expected_version)
        answer = await self._shielded(
            "delete", lambda: script(keys=keys, args=[expected, session_id])
        )
        done, number = _answer(session_id, answer)
        if not done:
            raise SessionConflictError(session_id, expected_version or 0, number)
        return number != 0
