"""What both sides measure: the rows, their sizes, and the loopback SSE server.

Standard library only: the AgentScope side imports this module from its own venv, where
trioagent is not installed.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

#: Chunks of the streamed reply rows.
STREAM_CHUNKS = 200
#: Replies per round of the streamed rows (events/s over all of them).
STREAM_REPLIES = 20
#: Replies per round of the tool rows.
TOOL_REPLIES = 150
#: Tools called in parallel in one turn.
PARALLEL_TOOLS = 20
PARALLEL_REPLIES = 25
#: Interrupts per round (p50 and p99 over them).
INTERRUPTS = 200
#: Deltas streamed before the interrupt (the model then stalls until interrupted).
INTERRUPT_AFTER = 5
#: The short reply: chunks of the answer, messages of history, replies per round.
SHORT_CHUNKS = 10
SHORT_HISTORY = 10
SHORT_REPLIES = 200
LONG_HISTORY = 5_000
LONG_REPLIES = 20
#: The real-HTTP row: concurrent replies, tokens per streamed reply.
HTTP_REPLIES = 100
HTTP_TOKENS = 200
#: The many-replies HTTP row: concurrent replies; how often resident memory is sampled (s).
HTTP_MANY = 1_000
RSS_SAMPLE = 0.02
#: The slow-consumer row: its delay per event (s), chunks per reply, replies per round.
SLOW_CONSUMER_DELAY = 0.001
SLOW_CHUNKS = 100
SLOW_REPLIES = 3
#: Cancellations and schedule points of the floor rows (the runtimes alone, no agent).
FLOOR_CANCELS = 1_000
FLOOR_CHECKPOINTS = 50_000
FLOOR_SCOPES = 20_000
#: SSE events the server writes per socket write, and the pause between two writes.
HTTP_EVENTS_PER_WRITE = 4
HTTP_WRITE_PAUSE = 0.004


@dataclass(frozen=True)
class Row:
    key: str
    label: str
    unit: str
    higher_is_better: bool
    #: The goal as trioagent / AgentScope (>= for throughput, <= for costs); None: no goal.
    goal: float | None = None


ROWS: list[Row] = [
    Row(
        "stream_yield_0", "streamed reply, 200 chunks, yield per chunk, 0 mw", "events/s", True, 2.0
    ),
    Row(
        "stream_yield_7", "streamed reply, 200 chunks, yield per chunk, 7 mw", "events/s", True, 3.0
    ),
    Row("stream_burst_7", "streamed reply, 200 chunks in bursts, 7 mw", "events/s", True),
    Row("tool_round_0", "tool round, 0 mw", "replies/s", True, 2.5),
    Row("tool_round_7", "tool round, 7 mw", "replies/s", True, 2.5),
    Row("parallel_20", "one turn calling 20 tools in parallel", "replies/s", True),
    Row("idle_memory", "idle agent with 10 messages", "kB", False),
    Row("interrupt_p50", "interrupt -> REPLY_END received, p50", "us", False, 1.0),
    Row("interrupt_p99", "interrupt -> REPLY_END received, p99", "us", False, 1.0),
    Row("short_reply", "short reply (10 chunks, 10 messages of history)", "us/reply", False, 0.5),
    Row("long_history", "the same with 5,000 messages of history", "us/reply", False),
    Row(
        "cancel_floor",
        "floor: cancel -> the cancelled task's handler, bare runtime, p50",
        "us",
        False,
    ),
    Row(
        "checkpoint_floor",
        "floor: one schedule point, bare runtime (trio / asyncio.sleep(0))",
        "us",
        False,
    ),
    Row(
        "scope_floor",
        "floor: a deadline scope entered and left, bare runtime (shielded trio "
        "CancelScope / asyncio.timeout)",
        "us",
        False,
    ),
    Row(
        "http_cpu",
        "real HTTP: 100 concurrent streamed replies, CPU per token",
        "us/token",
        False,
        0.5,
    ),
    Row(
        "http_many_cpu",
        "real HTTP: 1,000 concurrent streamed replies, CPU per token",
        "us/token",
        False,
        0.25,
    ),
    Row("http_many_ttft_p99", "the same: time to first token, p99", "ms", False),
    Row("http_many_rss", "the same: resident memory per concurrent reply", "kB", False),
    Row("slow_consumer", "streamed reply to a consumer taking 1 ms per event", "us/event", False),
]
ROW_KEYS = [r.key for r in ROWS]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def run_rows(measures: dict[str, Callable[[], dict[str, float]]], wanted: list[str]) -> None:
    """Run the measure functions whose rows are wanted; print one JSON object of results."""
    results: dict[str, float] = {}
    for name, measure in measures.items():
        keys = name.split(",")
        if any(k in wanted for k in keys):
            for key, value in measure().items():
                if key in wanted:
                    results[key] = value
    print(json.dumps(results))


#: The clock of the throughput and cost rows: CPU time of the process, which the other
#: processes of a busy machine disturb much less than wall time (the model has no latency,
#: so a reply's wall time is its CPU time plus time spent descheduled).
clock = time.process_time


def elapsed(start: float) -> float:
    return clock() - start


def rss_kb() -> float:
    """The process's resident memory now, in kB (Linux)."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1000


# -- the loopback SSE server (its own process, so its CPU is not the client's) ---------------


def _chunk(index: int) -> bytes:
    body = {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "bench",
        "choices": [{"index": 0, "delta": {"content": f"tok{index} "}, "finish_reason": None}],
    }
    return b"data: " + json.dumps(body).encode() + b"\n\n"


def _final() -> bytes:
    done = {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "bench",
        "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
    }
    usage = {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "bench",
        "choices": [],
        "usage": {"prompt_tokens": 10, "completion_tokens": HTTP_TOKENS, "total_tokens": 210},
    }
    return (
        b"data: " + json.dumps(done).encode() + b"\n\n"
        b"data: " + json.dumps(usage).encode() + b"\n\ndata: [DONE]\n\n"
    )


async def _serve_one(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    events = [_chunk(i) for i in range(HTTP_TOKENS)]
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            await reader.readexactly(length)
            writer.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                b"transfer-encoding: chunked\r\n\r\n"
            )
            for start in range(0, HTTP_TOKENS, HTTP_EVENTS_PER_WRITE):
                payload = b"".join(events[start : start + HTTP_EVENTS_PER_WRITE])
                writer.write(b"%x\r\n%s\r\n" % (len(payload), payload))
                await writer.drain()
                await asyncio.sleep(HTTP_WRITE_PAUSE)
            payload = _final()
            writer.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(payload), payload))
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def _serve() -> None:
    server = await asyncio.start_server(_serve_one, "127.0.0.1", 0, backlog=2048)
    port = server.sockets[0].getsockname()[1]
    print(port, flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__" and sys.argv[1:] == ["serve"]:
    asyncio.run(_serve())
