"""Replaceable factories for generated ids and timestamps.

Every id the library generates is ``uuid4().hex`` and every timestamp is a local, naive
``datetime.now().isoformat()``, as in AgentScope.  Tests and deterministic replays swap
the factories with :func:`set_id_factory` / :func:`set_timestamp_factory`.  The default id
generator is reseeded in a child process after ``os.fork()``, so forked workers never share ids.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable
from datetime import datetime, tzinfo

__all__ = [
    "current_datetime",
    "generate_id",
    "generate_timestamp",
    "set_id_factory",
    "set_timestamp_factory",
]


# Ids are not secrets: a private Mersenne Twister seeded from the OS is ~8x faster than
# uuid.uuid4() (which reads os.urandom per call), and events are built once per token.
_random = random.Random(os.urandom(32))


def _reseed() -> None:
    """Give a forked child its own sequence: without it, every child continues the parent's
    generator state and two children generate the same ids."""
    _random.seed(os.urandom(32))


if hasattr(os, "register_at_fork"):  # POSIX; elsewhere there is no fork to survive
    os.register_at_fork(after_in_child=_reseed)

_VERSION_MASK = ~(0xF000 << 64) & ~(0xC000 << 48)
_VERSION_BITS = (0x4000 << 64) | (0x8000 << 48)


def _default_id() -> str:
    """A random (version 4) UUID as 32 lowercase hex characters, like ``uuid4().hex``."""
    return ((_random.getrandbits(128) & _VERSION_MASK) | _VERSION_BITS).to_bytes(16).hex()


# The local date and time of the current second, formatted once per second: events are
# stamped once per streamed token, and ``datetime.now().isoformat()`` dominates that cost.
_stamped_second = -1
_stamped_prefix = ""


def _default_timestamp() -> str:
    """Local, naive ISO-8601 time with microseconds (``datetime.now().isoformat()``)."""
    global _stamped_second, _stamped_prefix
    now = time.time()
    second = int(now)
    if second != _stamped_second:
        _stamped_prefix = datetime.fromtimestamp(second).isoformat()
        _stamped_second = second
    return f"{_stamped_prefix}.{int((now - second) * 1_000_000):06d}"


_id_factory: Callable[[], str] = _default_id
_timestamp_factory: Callable[[], str] = _default_timestamp


def generate_id() -> str:
    """Return a new id from the current id factory."""
    return _id_factory()


def generate_timestamp() -> str:
    """Return the current timestamp from the current timestamp factory."""
    return _timestamp_factory()


def current_datetime(zone: tzinfo) -> datetime:
    """The current time in ``zone``, read from the timestamp factory (a local, naive ISO-8601
    time), so replacing that factory moves every clock the library reads."""
    return datetime.fromisoformat(generate_timestamp()).astimezone(zone)


def set_id_factory(factory: Callable[[], str] | None) -> None:
    """Replace the id factory; ``None`` restores ``uuid4().hex``."""
    global _id_factory
    _id_factory = factory if factory is not None else _default_id


def set_timestamp_factory(factory: Callable[[], str] | None) -> None:
    """Replace the timestamp factory; ``None`` restores ``datetime.now().isoformat()``."""
    global _timestamp_factory
    _timestamp_factory = factory if factory is not None else _default_timestamp
