"""Session-store benchmark: save + load of an agent state with a 1,000-message context.

For each store this measures one ``save`` (a new version, the version check included) and one
``load`` of the same state, in milliseconds (the median of several rounds), next to the
baseline of the same run: ``dumps`` + ``loads`` of the state in memory, which every store
pays too.  The ratio is store / baseline (how much the storage itself adds).

* SQLite: a file in a temporary directory (WAL, ``synchronous=NORMAL``, and ``FULL``);
* Redis: a redis-server started on a unix socket for the run (skipped, and said so, when
  redis-server is not installed).

The context alternates user and assistant messages (about 200 bytes of text each); every other
assistant message holds a tool call and its result.

Run: ``python benchmarks/session_store.py [--messages N] [--rounds R]``
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import trio

from trioagent.agent import AgentState
from trioagent.message import Msg, TextBlock, ToolCallBlock, ToolResultBlock, UserMsg
from trioagent.serialization import dumps, loads
from trioagent.session import RedisSessionStore, SessionStore, SQLiteSessionStore

TEXT = "The quick brown fox jumps over the lazy dog. " * 4


def big_state(messages: int) -> AgentState:
    state = AgentState()
    for i in range(messages):
        if i % 2 == 0:
            state.context.append(UserMsg("user", f"{i}: {TEXT}"))
            continue
        blocks: list[TextBlock | ToolCallBlock | ToolResultBlock] = [TextBlock(text=TEXT)]
        if i % 4 == 1:  # every other answer calls a tool and holds its result
            blocks.append(ToolCallBlock(id=f"c{i}", name="search", input=f'{{"q": "{i}"}}'))
            blocks.append(ToolResultBlock(id=f"c{i}", name="search", output=TEXT))
        state.context.append(Msg("agent", list(blocks), "assistant"))
    return state


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


async def measure(store: SessionStore, state: AgentState, rounds: int) -> tuple[float, float]:
    session = f"bench-{time.monotonic_ns()}"
    version = 0
    saves: list[float] = []
    load_times: list[float] = []
    for _ in range(rounds):
        start = time.perf_counter()
        version = await store.save(session, state, expected_version=version)
        saves.append(time.perf_counter() - start)
        start = time.perf_counter()
        loaded = await store.load(session)
        load_times.append(time.perf_counter() - start)
        assert loaded is not None
        assert loaded.version == version
    await store.delete(session)
    return median_ms(saves), median_ms(load_times)


def baseline(state: AgentState, rounds: int) -> tuple[float, float]:
    encode: list[float] = []
    decode: list[float] = []
    for _ in range(rounds):
        start = time.perf_counter()
        payload = dumps(state)
        encode.append(time.perf_counter() - start)
        start = time.perf_counter()
        loads(payload, AgentState)
        decode.append(time.perf_counter() - start)
    return median_ms(encode), median_ms(decode)


@contextlib.contextmanager
def redis_server(directory: Path) -> Iterator[str | None]:
    binary = shutil.which("redis-server")
    if binary is None:
        yield None
        return
    sock = directory / "redis.sock"
    args = ["--port", "0", "--unixsocket", str(sock), "--save", "", "--appendonly", "no"]
    proc = subprocess.Popen([binary, *args], stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.socket(socket.AF_UNIX) as s:
                s.connect(str(sock))
                break
            time.sleep(0.01)
        yield f"unix://{sock}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


async def main(messages: int, rounds: int) -> None:
    state = big_state(messages)
    size = len(dumps(state).encode())
    print(f"state: {len(state.context)} messages, {size / 1024:.0f} KiB of JSON, {rounds} rounds")
    enc, dec = baseline(state, rounds)
    print(f"{'':24} {'save ms':>9} {'load ms':>9} {'save+load':>10} {'ratio':>7}")
    base = enc + dec
    print(f"{'dumps + loads (baseline)':24} {enc:9.2f} {dec:9.2f} {base:10.2f} {1.0:7.2f}")
    rows: list[tuple[str, Callable[[], Awaitable[tuple[float, float]]]]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for sync in ("NORMAL", "FULL"):
            store = SQLiteSessionStore(Path(tmp) / f"{sync}.sqlite3", synchronous=sync)  # type: ignore[arg-type]

            def run(store: SQLiteSessionStore = store) -> Awaitable[tuple[float, float]]:
                return measure(store, state, rounds)

            rows.append((f"SQLite ({sync})", run))
        for name, run in rows:
            save, load = await run()
            total = save + load
            print(f"{name:24} {save:9.2f} {load:9.2f} {total:10.2f} {total / base:7.2f}")
        with redis_server(Path(tmp)) as url:
            if url is None:
                print("Redis: skipped (redis-server is not installed)")
                return
            async with RedisSessionStore(url) as redis:
                save, load = await measure(redis, state, rounds)
            total = save + load
            print(
                f"{'Redis (unix socket)':24} {save:9.2f} {load:9.2f} {total:10.2f} {total / base:7.2f}"
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    trio.run(main, args.messages, args.rounds)
