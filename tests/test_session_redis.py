"""``RedisSessionStore`` against a real redis-server (started per module on a unix socket):
the store contract, concurrent writers, a save cancelled while on the wire, and clear errors
(not opened, unreachable, corrupt data).  The URL's password never shows."""

from __future__ import annotations

import gc
import sys
import warnings
from collections.abc import Iterator

import coredis
import pytest
import trio
import trio.testing
from session_kit import (
    check_a_cancelled_save_completes_whole,
    check_a_damaged_record,
    check_store_contract,
    redis_server,
    sample_state,
    unique,
)

from trioagent.agent import AgentState
from trioagent.exception import MissingExtraError
from trioagent.message import UserMsg
from trioagent.serialization import dumps
from trioagent.session import (
    RedisSessionStore,
    SessionConflictError,
    SessionStore,
    SessionStoreError,
)


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    with redis_server() as url:
        yield url


async def test_the_store_contract(redis_url: str) -> None:
    async with RedisSessionStore(redis_url, namespace=unique()) as store:
        assert isinstance(store, SessionStore)
        await check_store_contract(store)


async def test_concurrent_writers_one_wins_the_others_conflict(redis_url: str) -> None:
    namespace = unique()
    async with RedisSessionStore(redis_url, namespace=namespace) as store:
        await store.save("s", sample_state(), expected_version=0)
    writers = 8
    outcomes: dict[int, object] = {}
    states = {i: sample_state(2) for i in range(writers)}
    for i, state in states.items():
        state.context.append(UserMsg("user", f"writer {i}"))

    async def write(i: int) -> None:
        async with RedisSessionStore(redis_url, namespace=namespace) as own:  # its own pool
            try:
                outcomes[i] = await own.save("s", states[i], expected_version=1)
            except SessionConflictError as exc:
                outcomes[i] = exc

    async with trio.open_nursery() as nursery:
        for i in range(writers):
            nursery.start_soon(write, i)
    winners = [i for i, o in outcomes.items() if o == 2]
    assert len(winners) == 1
    assert sum(isinstance(o, SessionConflictError) for o in outcomes.values()) == writers - 1
    async with RedisSessionStore(redis_url, namespace=namespace) as store:
        stored = await store.load("s")
    assert stored is not None
    assert stored.version == 2
    assert dumps(stored.state) == dumps(states[winners[0]])


async def test_a_cancelled_save_completes_and_the_client_stays_usable(redis_url: str) -> None:
    async with RedisSessionStore(redis_url, namespace=unique()) as store:
        await check_a_cancelled_save_completes_whole(store, lambda: trio.sleep(0))


async def test_namespaces_are_separate(redis_url: str) -> None:
    async with (
        RedisSessionStore(redis_url, namespace=unique()) as one,
        RedisSessionStore(redis_url, namespace=unique()) as two,
    ):
        await one.save("s", AgentState(), expected_version=0)
        assert await two.list() == []
        assert await two.version("s") == 0


async def test_an_existing_client_can_be_passed_in(redis_url: str) -> None:
    async with coredis.Redis.from_url(redis_url, decode_responses=False) as client:
        store = RedisSessionStore(client=client, namespace=unique())
        await store.save("s", AgentState(), expected_version=0)
        assert await store.list() == ["s"]


async def test_errors_are_clear_and_hide_the_password(redis_url: str) -> None:
    store = RedisSessionStore("redis://:hunter2@localhost:1/0", namespace="n")
    assert "hunter2" not in repr(store)
    with pytest.raises(SessionStoreError, match="not open"):
        await store.load("s")
    with pytest.raises(TypeError, match="exactly one"):
        RedisSessionStore()
    namespace = unique()
    async with coredis.Redis.from_url(redis_url, decode_responses=False) as client:
        await client.hset(f"{namespace}:s:s", {"version": "1", "payload": b"{not json"})
        store = RedisSessionStore(client=client, namespace=namespace)
        with pytest.raises(SessionStoreError, match="session 's' cannot be loaded"):
            await store.load("s")


async def test_without_the_redis_extra_entering_names_the_install_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "coredis", None)  # as if coredis were not installed
    store = RedisSessionStore("redis://localhost:1/0", namespace="n")
    with pytest.raises(MissingExtraError, match=r"pip install 'trioagent\[redis\]'") as info:
        async with store:
            pass
    assert isinstance(info.value, ImportError)
    assert info.value.name == "coredis"


GOOD = b"{}"  # a valid (empty) state


@pytest.mark.parametrize(
    ("fields", "readable"),
    [
        ({"version": b"two", "payload": GOOD}, None),  # a version that is not an integer
        ({"version": b"1.5", "payload": GOOD}, None),
        ({"version": b"-1", "payload": GOOD}, None),
        ({"version": b"0", "payload": GOOD}, None),  # versions start at 1
        ({"payload": GOOD, "updated_at": b"now"}, None),  # the version is missing
        ({"version": b"1", "updated_at": b"now"}, None),  # the payload is missing
        ({"version": b"1", "payload": b"{not json"}, 1),
        ({"version": b"1", "payload": b"[1, 2]"}, 1),  # JSON of the wrong shape
        ({"version": b"1", "payload": b'{"context": 5}'}, 1),  # a field of the wrong type
        ("a string", None),  # a key of the wrong type
        (["a", "list"], None),
    ],
    ids=[
        "text",
        "real",
        "negative",
        "zero",
        "no-version",
        "no-payload",
        "json",
        "shape",
        "field",
        "string-key",
        "list-key",
    ],
)
async def test_a_damaged_record_is_a_typed_error_and_never_overwritten(
    redis_url: str, fields: object, readable: int | None
) -> None:
    namespace = unique()
    key = f"{namespace}:s:s"
    async with coredis.Redis.from_url(redis_url, decode_responses=False) as client:
        if isinstance(fields, dict):
            await client.hset(key, fields)
        elif isinstance(fields, list):
            await client.rpush(key, fields)
        else:
            await client.set(key, str(fields))
        await client.zadd(f"{namespace}:sessions", {"s": 0})
        store = RedisSessionStore(client=client, namespace=namespace)

        async def raw() -> object:
            kind = await client.type(key)
            if kind in ("hash", b"hash"):
                return await client.hgetall(key)
            if kind in ("list", b"list"):
                return await client.lrange(key, 0, -1)
            return await client.get(key)

        await check_a_damaged_record(store, "s", raw, readable_version=readable)


async def test_an_unreachable_server_is_a_store_error_without_the_password() -> None:
    store = RedisSessionStore("redis://:hunter2@localhost:1/0", namespace="n")
    with warnings.catch_warnings(record=True) as leaked:
        warnings.simplefilter("always")
        with pytest.raises(SessionStoreError) as caught:
            async with store:
                await store.load("s")
        message = str(caught.value)
        del store, caught  # the traceback holds the connection
        # coredis leaves the buffers of a connection that never connected to the garbage
        # collector, which warns about them: collected here, under this block's filter.
        gc.collect()
    assert "hunter2" not in message
    assert all(issubclass(w.category, ResourceWarning) for w in leaked)
