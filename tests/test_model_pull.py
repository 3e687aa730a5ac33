"""``model.stream()``: a model call pulled directly (``trioagent.model._pull``).

The call runs in a reader task of a nursery owned by the block; chunks cross a bounded
memory channel and coalesce when the puller lags.  The sweep below is ``cancel_sweep``'s for a
model pulled directly: cancel after every schedule point, by leaving the block ("leave") or by
an enclosing cancel scope ("outer"), and check the call's rules each time: exactly one end
(the complete response, or the INTERRUPTED partial), no task left, no busy connection.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import pytest
import trio
import trio.testing
from provider_kit import open_connections

from trioagent.exception import ModelStreamError
from trioagent.message import SystemMsg, TextBlock, ThinkingBlock, ToolCallBlock, UserMsg
from trioagent.model import ChatModelBase, ChatResponse, ModelStream
from trioagent.testing import (
    ScriptedModel,
    ScriptedReply,
    ScriptedToolCall,
    serve_openai_compatible,
    text_chunks,
    thinking_chunks,
    tool_call_chunks,
)
from trioagent.testing._sweep import _StepCounter  # the sweep's own instrument
from trioagent.types import FinishedReason

MSGS = [SystemMsg("system", "Be brief."), UserMsg("user", "hi")]


def _texts(chunks: list[ChatResponse], kind: type = TextBlock) -> dict[str, str]:
    """Per block id, the concatenation of the pulled deltas' fragments of ``kind``."""
    out: dict[str, str] = {}
    for chunk in chunks:
        for block in chunk.content:
            if isinstance(block, TextBlock) and kind is TextBlock:
                out[block.id] = out.get(block.id, "") + block.text
            elif isinstance(block, ThinkingBlock) and kind is ThinkingBlock:
                out[block.id] = out.get(block.id, "") + block.thinking
            elif isinstance(block, ToolCallBlock) and kind is ToolCallBlock:
                out[block.id] = out.get(block.id, "") + block.input
    return out


def _live_tasks() -> set[trio.lowlevel.Task]:
    return {t for n in trio.lowlevel.current_task().child_nurseries for t in n.child_tasks}


def _script() -> list[ChatResponse]:
    return [
        *thinking_chunks("let me ", "think", block_id="K"),
        *text_chunks("Trio ", "keeps ", "every ", "task ", "owned.", block_id="T"),
        *tool_call_chunks("c1", "get_weather", '{"city"', ': "Paris"}'),
    ]


async def test_pull_yields_deltas_then_the_complete_response() -> None:
    model = ScriptedModel([_script()])
    async with model.stream(MSGS) as chunks:
        pulled = [chunk async for chunk in chunks]
    assert [c.is_last for c in pulled] == [False] * 9 + [True]
    final = pulled[-1]
    assert chunks.response is final
    assert final.finished_reason == FinishedReason.COMPLETED
    assert [b.text for b in final.content if isinstance(b, TextBlock)] == [
        "Trio keeps every task owned."
    ]
    (call,) = [b for b in final.content if isinstance(b, ToolCallBlock)]
    assert (call.name, call.input) == ("get_weather", '{"city": "Paris"}')
    assert model.requests[0].messages[1].get_text_content() == "hi"


async def test_leaving_the_block_early_ends_the_call_interrupted() -> None:
    model = ScriptedModel([_script()])
    pulled: list[ChatResponse] = []
    before = _live_tasks()
    async with model.stream(MSGS) as chunks:
        async for chunk in chunks:
            pulled.append(chunk)
            if _texts(pulled).get("T"):
                break
    assert _live_tasks() == before
    assert chunks.response is not None
    assert chunks.response.is_last
    assert chunks.response.finished_reason == FinishedReason.INTERRUPTED
    texts = [b.text for b in chunks.response.content if isinstance(b, TextBlock)]
    assert texts
    assert texts[0].startswith("Trio ")


async def test_cancelling_the_block_propagates_and_keeps_the_partial(
    autojump_clock: trio.testing.MockClock,
) -> None:
    model = ScriptedModel([text_chunks("a", "b", "c", block_id="T")], chunk_delay=1.0)
    pulled: list[ChatResponse] = []
    with trio.move_on_after(2.5) as scope:
        async with model.stream(MSGS) as chunks:
            async for chunk in chunks:
                pulled.append(chunk)
    assert scope.cancelled_caught
    assert "".join(_texts(pulled).values()) == "ab"
    assert chunks.response is not None
    assert chunks.response.finished_reason == FinishedReason.INTERRUPTED
    assert _texts([chunks.response]) == {"T": "ab"}


async def test_a_provider_error_is_raised_from_the_block() -> None:
    model = ScriptedModel([ModelStreamError("the stream broke")])
    stream = model.stream(MSGS)

    async def pull() -> None:
        async with stream as chunks:
            async for _ in chunks:
                pass

    with pytest.raises(ModelStreamError, match="the stream broke"):
        await pull()
    assert stream.response is None


async def test_a_lagging_puller_gets_coalesced_deltas(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """With no buffer, everything produced while the puller was busy arrives as one chunk,
    per block id in order, and the deltas still concatenate to the full response."""
    model = ScriptedModel([_script()], chunk_delay=0.1)
    pulled: list[ChatResponse] = []
    async with model.stream(MSGS, buffer_size=0) as chunks:
        async for chunk in chunks:
            pulled.append(chunk)
            await trio.sleep(0.35)  # the puller lags: ~3 deltas arrive per pull
    *deltas, final = pulled
    assert final.is_last
    assert chunks.response is final
    assert len(deltas) < 9
    assert _texts(deltas) == {"T": "Trio keeps every task owned."}
    assert _texts(deltas, ThinkingBlock) == {"K": "let me think"}
    assert _texts(deltas, ToolCallBlock) == {"c1": '{"city": "Paris"}'}
    names = {b.name for c in deltas for b in c.content if isinstance(b, ToolCallBlock)}
    assert names == {"get_weather"}


def test_buffer_size_must_not_be_negative() -> None:
    with pytest.raises(ValueError, match="buffer_size"):
        ScriptedModel([]).stream(MSGS, buffer_size=-1)


async def test_a_stream_is_entered_once() -> None:
    model = ScriptedModel([_script()])
    stream = model.stream(MSGS)
    async with stream as chunks:
        async for _ in chunks:
            pass
        with pytest.raises(RuntimeError, match="entered once"):
            await stream.__aenter__()
    assert isinstance(stream, ModelStream)


# -- the sweep -----------------------------------------------------------------------------


@attrs.define
class _Run:
    steps: int
    fired: bool
    end: FinishedReason


async def _pull_once(
    make_model: Callable[[], Awaitable[ChatModelBase]], mode: str, cancel_at: int | None
) -> _Run:
    model = await make_model()
    before = _live_tasks()
    pulled: list[ChatResponse] = []
    outer, body = trio.CancelScope(), trio.CancelScope()
    steps = _StepCounter(
        trio.lowlevel.current_task(), cancel_at, (outer if mode == "outer" else body).cancel
    )
    trio.lowlevel.add_instrument(steps)
    try:
        with outer:
            async with model.stream(MSGS) as chunks:
                with body:
                    async for chunk in chunks:
                        pulled.append(chunk)
    finally:
        trio.lowlevel.remove_instrument(steps)
    where = f"{mode} at {cancel_at}"
    # Exactly one end: the complete response (the puller's last chunk if it got that far),
    # or the INTERRUPTED partial, which holds at least what the puller saw.
    end = chunks.response
    assert end is not None, where
    assert end.is_last, where
    lasts = [c for c in pulled if c.is_last]
    assert len(lasts) <= 1, where
    assert all(c is pulled[-1] for c in lasts), where
    if lasts:
        assert lasts[0] is end, where
        assert end.finished_reason == FinishedReason.COMPLETED, where
    else:
        assert end.finished_reason in (FinishedReason.INTERRUPTED, FinishedReason.COMPLETED)
    if end.finished_reason == FinishedReason.INTERRUPTED:
        assert steps.fired, where
        assert mode != "outer" or outer.cancelled_caught, where
    full = {b.id: b.text for b in end.content if isinstance(b, TextBlock)}
    for block_id, text in _texts([c for c in pulled if not c.is_last]).items():
        assert full[block_id].startswith(text), where
    # No task left, no busy connection.
    assert _live_tasks() == before, where
    client = model.existing_http_client
    if client is not None:
        assert all(c.is_idle() or c.is_closed() for c in open_connections(client)), where
    return _Run(steps.steps, steps.fired, end.finished_reason)


async def _sweep(make_model: Callable[[], Awaitable[ChatModelBase]], mode: str) -> list[_Run]:
    baseline = await _pull_once(make_model, mode, None)
    assert baseline.steps > 3
    return [await _pull_once(make_model, mode, k) for k in range(1, baseline.steps + 1)]


@pytest.mark.parametrize("mode", ["leave", "outer"])
async def test_sweep_model_stream_scripted(
    autojump_clock: trio.testing.MockClock, mode: str
) -> None:
    async def make_model() -> ChatModelBase:
        return ScriptedModel([_script()], chunk_delay=0.5)

    runs = await _sweep(make_model, mode)
    assert all(run.fired for run in runs)
    assert {run.end for run in runs} == {FinishedReason.INTERRUPTED, FinishedReason.COMPLETED}


@pytest.mark.parametrize("mode", ["leave", "outer"])
async def test_sweep_model_stream_over_http(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, mode: str
) -> None:
    """Real sockets and SSE: the number of schedule points varies a little between runs, so
    runs that end before their cancellation point are tolerated."""
    reply = ScriptedReply(
        text="Trio keeps every task owned.",
        tool_calls=[ScriptedToolCall("get_weather", '{"city": "Paris"}')],
        chunk_size=6,
    )
    models: list[ChatModelBase] = []
    servers: list[Any] = []

    async def make_model() -> ChatModelBase:
        server = await nursery.start(serve_openai_compatible, [reply])
        model = server.chat_model(read_timeout=None, connect_timeout=None, max_retries=0)
        servers.append(server)
        models.append(model)
        return model

    runs = await _sweep(make_model, mode)
    assert sum(run.fired for run in runs) > len(runs) // 2
    assert FinishedReason.INTERRUPTED in {run.end for run in runs}
    for model in models:
        await model.aclose()
    for server in servers:
        with trio.fail_after(5):
            await server.wait_all_closed()


async def test_a_lagging_puller_over_http_gets_coalesced_chunks(nursery: trio.Nursery) -> None:
    """The reader keeps draining the socket while the puller sleeps: what arrived meanwhile
    comes as coalesced chunks, and their concatenation is the full response."""
    text = "".join(f"word{i} " for i in range(300))
    server = await nursery.start(serve_openai_compatible, [ScriptedReply(text=text, chunk_size=5)])
    async with server.chat_model(max_retries=0) as model:
        pulled: list[ChatResponse] = []
        async with model.stream(MSGS, buffer_size=4) as chunks:
            async for chunk in chunks:
                pulled.append(chunk)
                if len(pulled) == 1:
                    await trio.sleep(0.5)  # lag: the rest of the answer arrives meanwhile
    *deltas, final = pulled
    assert final.is_last
    assert "".join(_texts([final]).values()) == text
    assert "".join(_texts(deltas).values()) == text
    events = -(-len(text) // 5)
    assert len(deltas) < events
    assert max(len(t.text) for d in deltas for t in d.content if isinstance(t, TextBlock)) > 5
    assert all(c.is_idle() or c.is_closed() for c in open_connections(model.http_client))
