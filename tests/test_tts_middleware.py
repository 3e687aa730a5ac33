"""TTSMiddleware (trioagent/middleware/_tts.py): the standard and realtime event orders of the
seed, base64 audio deltas correlated to the text block, cancellation during synthesis, a
failing speech model, and a cancel sweep of TTS + ModelRouter stacked
(tools_middleware.md §8.3)."""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from typing import Any

import pytest
import trio
import trio.testing
from agent_helpers import Recorder, make_agent, user
from tts_kit import PCM, ChannelRealtimeTTS, DirectRealtimeTTS, FakeTTS

from trioagent._core.ids import set_id_factory
from trioagent.agent import Agent
from trioagent.event import (
    AgentEvent,
    CustomEvent,
    DataBlockDeltaEvent,
    DataBlockEndEvent,
    DataBlockStartEvent,
    ReplyEndEvent,
    TextBlockEndEvent,
    TextBlockStartEvent,
)
from trioagent.message import Msg, ToolCallBlock
from trioagent.middleware import (
    ChatModelCandidate,
    MiddlewareBase,
    ModelRouterMiddleware,
    TTSMiddleware,
)
from trioagent.model import ChatResponse
from trioagent.permission import PermissionBehavior, PermissionDecision
from trioagent.testing import (
    CancelMode,
    ScriptedModel,
    SweepRun,
    cancel_sweep,
    text_chunks,
    thinking_chunks,
)
from trioagent.tool import Toolkit
from trioagent.tts import EspeakTTSModel, TTSError
from trioagent.types import ReplyFinishedReason


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def data_events(events: Sequence[Any]) -> list[Any]:
    return [e for e in events if str(e.type).startswith("DATA_BLOCK")]


def audio_of(events: Sequence[Any], block_id: str) -> bytes:
    return b"".join(
        base64.b64decode(e.data)
        for e in events
        if isinstance(e, DataBlockDeltaEvent) and e.block_id == block_id
    )


def text_block_ids(events: Sequence[Any]) -> list[str]:
    return [e.block_id for e in events if isinstance(e, TextBlockStartEvent)]


async def reply(tts: Any, steps: Sequence[Any], **kwargs: Any) -> tuple[Agent, Msg, Recorder]:
    agent, _ = make_agent(list(steps), middlewares=[TTSMiddleware(tts)], **kwargs)
    rec = Recorder()
    msg = await agent.reply(user(), on_event=rec)
    return agent, msg, rec


# -- standard mode -------------------------------------------------------------------------------


async def test_standard_mode_speaks_after_the_text_block() -> None:
    tts = FakeTTS([b"AUDIO"])
    agent, msg, rec = await reply(tts, [text_chunks("Hello ", "world")])
    assert rec.types == [
        "REPLY_START",
        "MODEL_CALL_START",
        "TEXT_BLOCK_START",
        "TEXT_BLOCK_DELTA",
        "TEXT_BLOCK_DELTA",
        "TEXT_BLOCK_END",
        "DATA_BLOCK_START",
        "DATA_BLOCK_DELTA",
        "DATA_BLOCK_END",
        "MODEL_CALL_END",
        "REPLY_END",
    ]
    assert tts.texts == ["Hello world"]
    start, delta, end = data_events(rec.events)
    assert isinstance(start, DataBlockStartEvent)
    assert start.media_type == "audio/wav"
    assert isinstance(delta, DataBlockDeltaEvent)
    assert (delta.data, delta.media_type) == (b64(b"AUDIO"), "audio/wav")
    assert isinstance(end, DataBlockEndEvent)
    assert start.block_id == delta.block_id == end.block_id
    (text_id,) = text_block_ids(rec.events)
    assert start.block_id != text_id
    for event in (start, delta, end):
        assert event.metadata == {"text_block_id": text_id}
        assert event.reply_id == agent.state.reply_id
    # The audio is not part of the answer or the context.
    assert msg.get_text_content() == "Hello world"
    assert not any(b.type == "data" for m in agent.state.context for b in m.content)


async def test_standard_mode_streams_several_chunks_into_one_block() -> None:
    _, _, rec = await reply(FakeTTS([b"AAAA", b"BBBB"]), [text_chunks("Hi")])
    kinds = [str(e.type) for e in data_events(rec.events)]
    assert kinds == ["DATA_BLOCK_START", "DATA_BLOCK_DELTA", "DATA_BLOCK_DELTA", "DATA_BLOCK_END"]
    start = data_events(rec.events)[0]
    assert audio_of(rec.events, start.block_id) == b"AAAABBBB"


async def test_whitespace_text_is_not_synthesized() -> None:
    tts = FakeTTS()
    _, _, rec = await reply(tts, [text_chunks("  ", "\n")])
    assert tts.texts == []
    assert data_events(rec.events) == []


async def test_the_id_factory_names_the_audio_block() -> None:
    ids = iter(range(1000))
    set_id_factory(lambda: f"id-{next(ids)}")
    try:
        _, _, rec = await reply(FakeTTS(), [text_chunks("Hello")])
    finally:
        set_id_factory(None)
    block_ids = {e.block_id for e in data_events(rec.events)}
    assert len(block_ids) == 1
    assert block_ids.pop().startswith("id-")


async def test_each_text_block_gets_its_own_audio_block_and_thinking_is_silent() -> None:
    toolkit = Toolkit()

    async def clock() -> str:
        """The time."""
        return "noon"

    toolkit.register_function(
        clock, permission=PermissionDecision(behavior=PermissionBehavior.ALLOW, message="ok")
    )
    call = ToolCallBlock(id="c1", name="clock", input="{}")
    tts = FakeTTS()
    _, msg, rec = await reply(
        tts,
        [
            [
                *thinking_chunks("let me check"),
                *text_chunks("Checking."),
                ChatResponse(content=[call], is_last=False),
            ],
            text_chunks("It is noon."),
        ],
        toolkit=toolkit,
    )
    assert tts.texts == ["Checking.", "It is noon."]
    starts = [e for e in rec.events if isinstance(e, DataBlockStartEvent)]
    assert len(starts) == 2
    assert starts[0].block_id != starts[1].block_id
    assert [s.metadata["text_block_id"] for s in starts] == text_block_ids(rec.events)
    assert msg.get_text_content() == "It is noon."


async def test_a_replaced_text_is_spoken_instead_of_the_deltas() -> None:
    class Censor(MiddlewareBase):
        async def on_reply(self, agent, input_kwargs, next_handler, emit):  # type: ignore[no-untyped-def]
            async def sink(item: Any) -> None:
                if isinstance(item, TextBlockEndEvent):
                    item = TextBlockEndEvent(
                        reply_id=item.reply_id, block_id=item.block_id, text="[redacted]"
                    )
                await emit(item)

            await next_handler(sink)

    tts = FakeTTS()
    agent, _ = make_agent([text_chunks("secret")], middlewares=[TTSMiddleware(tts), Censor()])
    await agent.reply(user())
    assert tts.texts == ["[redacted]"]


# -- realtime mode ----------------------------------------------------------------------------------


async def test_realtime_mode_interleaves_audio_with_the_text() -> None:
    tts = DirectRealtimeTTS(on_push=lambda t: b"PUSH1" if t == "Hello " else b"PUSH2")
    _, _, rec = await reply(tts, [text_chunks("Hello ", "world")])
    assert rec.types == [
        "REPLY_START",
        "MODEL_CALL_START",
        "TEXT_BLOCK_START",
        "TEXT_BLOCK_DELTA",
        "DATA_BLOCK_START",
        "DATA_BLOCK_DELTA",
        "TEXT_BLOCK_DELTA",
        "DATA_BLOCK_DELTA",
        "TEXT_BLOCK_END",
        "DATA_BLOCK_DELTA",
        "DATA_BLOCK_END",
        "MODEL_CALL_END",
        "REPLY_END",
    ]
    assert tts.log == ["open", "push:Hello ", "push:world", "flush", "close"]
    start = data_events(rec.events)[0]
    assert start.media_type == PCM
    assert audio_of(rec.events, start.block_id) == b"PUSH1PUSH2DRAIN"
    assert {e.block_id for e in data_events(rec.events)} == {start.block_id}


async def test_realtime_pushes_without_audio_open_the_block_late() -> None:
    tts = DirectRealtimeTTS(on_push=lambda t: None, on_flush=b"FINAL")
    _, _, rec = await reply(tts, [text_chunks("a", "b")])
    assert [str(e.type) for e in data_events(rec.events)] == [
        "DATA_BLOCK_START",
        "DATA_BLOCK_DELTA",
        "DATA_BLOCK_END",
    ]
    assert data_events(rec.events)[1].data == b64(b"FINAL")
    assert tts.log.count("flush") == 1


async def test_realtime_session_is_opened_only_for_text() -> None:
    tts = DirectRealtimeTTS()
    _, _, rec = await reply(tts, [thinking_chunks("only thinking"), text_chunks("")])
    assert tts.log == []
    assert data_events(rec.events) == []


async def test_realtime_audio_from_a_background_provider(
    autojump_clock: trio.testing.MockClock,
) -> None:
    tts = ChannelRealtimeTTS(latency=0.3)
    agent, _ = make_agent(
        model=ScriptedModel([text_chunks("one ", "two ", "three")], chunk_delay=1.0),
        middlewares=[TTSMiddleware(tts)],
    )
    rec = Recorder()
    await agent.reply(user(), on_event=rec)
    types = rec.types
    # Audio of earlier deltas arrives while the text is still streaming.
    assert types.index("DATA_BLOCK_START") < types.index("TEXT_BLOCK_END")
    start = data_events(rec.events)[0]
    assert audio_of(rec.events, start.block_id) == b"<one ><two ><three><end>"
    assert types.index("DATA_BLOCK_END") < types.index("REPLY_END")
    assert tts.log == ["connect", "close"]


# -- cancellation -----------------------------------------------------------------------------------


def assert_closed_before_the_end(events: Sequence[AgentEvent]) -> None:
    """Every opened data block got its END, before the one REPLY_END (the last event)."""
    ends = [i for i, e in enumerate(events) if isinstance(e, ReplyEndEvent)]
    assert ends == [len(events) - 1]
    opened = {e.block_id: i for i, e in enumerate(events) if isinstance(e, DataBlockStartEvent)}
    closed = {e.block_id: i for i, e in enumerate(events) if isinstance(e, DataBlockEndEvent)}
    assert set(opened) == set(closed)
    for block_id, at in opened.items():
        assert at < closed[block_id] < ends[0]


@pytest.mark.parametrize("mode", ["interrupt", "outer"])
async def test_cancel_during_synthesis_closes_the_audio_block(
    mode: str, autojump_clock: trio.testing.MockClock
) -> None:
    tts = FakeTTS([b"A", b"B", b"C"], delay=10.0)
    agent, _ = make_agent([text_chunks("Hello")], middlewares=[TTSMiddleware(tts)])
    rec = Recorder()
    result: list[Msg] = []
    with trio.move_on_after(25 if mode == "outer" else 1000) as scope:
        async with trio.open_nursery() as nursery:

            async def run() -> None:
                result.append(await agent.reply(user(), on_event=rec))

            nursery.start_soon(run)
            if mode == "interrupt":
                await trio.sleep(25)
                agent.interrupt()
    assert scope.cancelled_caught == (mode == "outer")
    assert tts.texts == ["Hello"]
    assert tts.finished == []  # synthesis stopped after two of three chunks
    assert [str(e.type) for e in data_events(rec.events)] == [
        "DATA_BLOCK_START",
        "DATA_BLOCK_DELTA",
        "DATA_BLOCK_DELTA",
        "DATA_BLOCK_END",
    ]
    assert_closed_before_the_end(rec.events)
    assert [str(e.finished_reason) for e in rec.ends] == ["interrupted"]
    if mode == "interrupt":
        assert result[0].finished_reason == ReplyFinishedReason.INTERRUPTED


async def test_cancel_during_a_realtime_flush(autojump_clock: trio.testing.MockClock) -> None:
    tts = ChannelRealtimeTTS(latency=3.0)
    agent, _ = make_agent(
        model=ScriptedModel([text_chunks("a", "b")], chunk_delay=5.0),
        middlewares=[TTSMiddleware(tts)],
    )
    rec = Recorder()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(partial_reply, agent, rec)
        # Connect 5→8, "<a>" 8→11, "<b>" 11→14, the flush 14→17: interrupt in the flush.
        await trio.sleep(16)
        agent.interrupt()
    start = data_events(rec.events)[0]
    assert audio_of(rec.events, start.block_id) == b"<a><b>"
    assert_closed_before_the_end(rec.events)
    assert tts.log == ["connect", "close"]


async def partial_reply(agent: Agent, rec: Recorder) -> None:
    await agent.reply(user(), on_event=rec)


async def test_cancel_while_text_streams_never_synthesizes_the_partial_text(
    autojump_clock: trio.testing.MockClock,
) -> None:
    tts = FakeTTS()
    agent, _ = make_agent(
        model=ScriptedModel([text_chunks("a", "b", "c")], chunk_delay=1.0),
        middlewares=[TTSMiddleware(tts)],
    )
    rec = Recorder()
    with trio.move_on_after(2.5):
        await agent.reply(user(), on_event=rec)
    assert "TEXT_BLOCK_END" in rec.types  # closed by the cleanup, passed straight out
    assert tts.texts == []
    assert data_events(rec.events) == []
    assert rec.types[-1] == "REPLY_END"


# -- a failing speech model ----------------------------------------------------------------------------


async def test_a_failing_speech_model_does_not_fail_the_reply() -> None:
    tts = FakeTTS(error=TTSError("voice service down"))
    _, msg, rec = await reply(tts, [text_chunks("one")])
    assert msg.finished_reason == ReplyFinishedReason.COMPLETED
    errors = [e for e in rec.events if isinstance(e, CustomEvent)]
    assert [(e.name, e.value["message"]) for e in errors] == [("tts_error", "voice service down")]
    assert rec.types[-1] == "REPLY_END"


async def test_a_failing_realtime_provider_closes_the_block_and_stops_speaking(
    autojump_clock: trio.testing.MockClock,
) -> None:
    tts = ChannelRealtimeTTS(latency=0.3, fail_on="b")
    agent, _ = make_agent(
        model=ScriptedModel([text_chunks("a", "b", "c")], chunk_delay=1.0),
        middlewares=[TTSMiddleware(tts)],
    )
    rec = Recorder()
    msg = await agent.reply(user(), on_event=rec)
    assert msg.get_text_content() == "abc"
    assert_closed_before_the_end(rec.events)
    kinds = rec.types
    assert kinds.index("CUSTOM") > kinds.index("DATA_BLOCK_END")
    start = data_events(rec.events)[0]
    assert audio_of(rec.events, start.block_id) == b"<a>"


async def test_a_realtime_connect_failure_is_reported(
    autojump_clock: trio.testing.MockClock,
) -> None:
    tts = ChannelRealtimeTTS(connect_error=ConnectionRefusedError("tts host unreachable"))
    _, msg, rec = await reply(tts, [text_chunks("a", "b")])
    assert msg.finished_reason == ReplyFinishedReason.COMPLETED
    (error,) = [e for e in rec.events if isinstance(e, CustomEvent)]
    assert error.value == {"error": "ConnectionRefusedError", "message": "tts host unreachable"}
    assert data_events(rec.events) == []


async def test_missing_espeak_is_reported_in_the_stream(tmp_path: Any) -> None:
    tts = EspeakTTSModel(program=tmp_path / "espeak-ng")
    _, msg, rec = await reply(tts, [text_chunks("hello")])
    (error,) = [e for e in rec.events if isinstance(e, CustomEvent)]
    assert error.value["error"] == "EspeakNotFoundError"
    assert "apt-get install espeak-ng" in error.value["message"]
    assert msg.get_text_content() == "hello"


def test_tts_model_is_type_checked() -> None:
    with pytest.raises(TypeError, match="TTSModelBase"):
        TTSMiddleware("espeak")  # type: ignore[arg-type]


# -- the sweep: TTS (realtime) + router stacked -----------------------------------------------------


def pick(name: str) -> ChatResponse:
    return ChatResponse(
        content=[
            ToolCallBlock(
                id="route", name="generate_structured_output", input=json.dumps({"choice": name})
            )
        ]
    )


@pytest.mark.parametrize("mode", [CancelMode.INTERRUPT, CancelMode.OUTER])
async def test_cancel_sweep_tts_and_router(
    mode: CancelMode, autojump_clock: trio.testing.MockClock
) -> None:
    defaults: dict[int, Any] = {}

    def make() -> Agent:
        router = ScriptedModel([pick("smart")], model="router")
        smart = ScriptedModel([text_chunks("Hel", "lo", " there")], model="smart", chunk_delay=0.5)
        default = ScriptedModel([], model="default")
        agent, _ = make_agent(
            model=default,
            middlewares=[
                TTSMiddleware(ChannelRealtimeTTS(latency=0.25)),
                ModelRouterMiddleware(router, [ChatModelCandidate("smart", smart, "all")]),
            ],
        )
        defaults[id(agent)] = default
        return agent

    def check(run: SweepRun) -> None:
        assert run.agent.model is defaults[id(run.agent)], "the agent's model was not restored"
        if run.events:
            assert_closed_before_the_end(run.events)

    report = await cancel_sweep(make, lambda: user("hi"), mode=mode, check=check)
    spoken_then_cut = [
        run
        for run in report.runs
        if run.end is not None
        and run.end.finished_reason == "interrupted"
        and any(isinstance(e, DataBlockStartEvent) for e in run.events)
    ]
    assert spoken_then_cut  # cancellations landed while audio blocks were open
    baseline = report.runs[0]
    assert baseline.end is not None
    assert baseline.end.finished_reason == "completed"
    assert len(data_events(baseline.events)) >= 3  # the baseline really spoke
    assert report.points > 20
    assert report.outcomes["interrupted"] > 0


async def test_an_outer_layer_failing_on_audio_is_not_a_speech_failure() -> None:
    class Picky(MiddlewareBase):
        async def on_reply(self, agent, input_kwargs, next_handler, emit):  # type: ignore[no-untyped-def]
            async def sink(item: Any) -> None:
                if isinstance(item, DataBlockDeltaEvent):
                    raise ValueError("no audio here")
                await emit(item)

            await next_handler(sink)

    agent, _ = make_agent([text_chunks("hi")], middlewares=[Picky(), TTSMiddleware(FakeTTS())])
    rec = Recorder()
    with pytest.raises(ValueError, match="no audio here"):
        await agent.reply(user(), on_event=rec)
    assert not any(isinstance(e, CustomEvent) for e in rec.events)
    assert_closed_before_the_end(rec.events)
