"""TTSMiddleware: the standard and realtime event orders, base64 audio deltas correlated to
the text block, cancellation during synthesis, a failing speech model, and a cancel sweep of
TTS + ModelRouter stacked; and the edge cases (speech models failing mid stream or hanging up,
long and silent texts, realtime sessions across text blocks)."""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from typing import Any

import pytest
import trio
import trio.testing
from agent_helpers import Recorder, make_agent, user
from agent_kit import call
from middleware_kit import lookup_toolkit, no_tasks_left
from tts_kit import PCM, ChannelRealtimeTTS, DirectRealtimeTTS, FakeTTS, chunk

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
from trioagent.message import DataBlock, Msg, ToolCallBlock, URLSource
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
from trioagent.tts import EspeakTTSModel, TTSEmit, TTSError, TTSModelBase, TTSResponse
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


# -- shared helpers ----------------------------------------------------------------------------


def custom_errors(events: Sequence[Any]) -> list[CustomEvent]:
    return [e for e in events if isinstance(e, CustomEvent) and e.name == "tts_error"]


def assert_blocks_closed_before_the_end(events: Sequence[AgentEvent]) -> None:
    """Every data block opened got exactly one END, before the one REPLY_END (the last event)."""
    ends = [i for i, e in enumerate(events) if isinstance(e, ReplyEndEvent)]
    assert ends == [len(events) - 1]
    starts = [e.block_id for e in events if isinstance(e, DataBlockStartEvent)]
    closes = [e.block_id for e in events if isinstance(e, DataBlockEndEvent)]
    assert sorted(starts) == sorted(closes)
    assert len(set(starts)) == len(starts)
    open_blocks: set[str] = set()
    for event in events:
        if isinstance(event, DataBlockStartEvent):
            open_blocks.add(event.block_id)
        elif isinstance(event, DataBlockDeltaEvent):
            assert event.block_id in open_blocks, "a delta outside its block"
        elif isinstance(event, DataBlockEndEvent):
            open_blocks.remove(event.block_id)
    assert not open_blocks


# -- TTSMiddleware -----------------------------------------------------------------------------------


class BreakingTTS(TTSModelBase):
    """Standard mode: emits ``good`` chunks, then raises ``error`` (mid stream)."""

    def __init__(self, good: int = 1, error: Exception | None = None) -> None:
        super().__init__("breaking-tts")
        self.good = good
        self.error = error or TTSError("voice lost mid-sentence")
        self.texts: list[str] = []

    async def _synthesize(self, text: str, emit: TTSEmit) -> None:
        self.texts.append(text)
        for i in range(self.good):
            await trio.lowlevel.checkpoint()
            await emit(chunk(f"part{i}".encode(), "audio/wav"))
        raise self.error


class URLTTS(TTSModelBase):
    """Standard mode: the audio is hosted; chunks carry a URL."""

    def __init__(self) -> None:
        super().__init__("url-tts")

    async def _synthesize(self, text: str, emit: TTSEmit) -> None:
        await trio.lowlevel.checkpoint()
        source = URLSource(url="https://cdn.example/a.mp3", media_type="audio/mpeg")
        await emit(TTSResponse(content=DataBlock(source=source), is_last=False))


def two_text_rounds() -> tuple[Toolkit, list[Any]]:
    return lookup_toolkit(), [
        [
            *text_chunks("First."),
            ChatResponse(content=[call("c1", "lookup", q="x")], is_last=False),
        ],
        text_chunks("Second."),
    ]


async def tts_reply(
    tts: TTSModelBase, steps: Sequence[Any], **kwargs: Any
) -> tuple[Agent, Msg, Recorder]:
    agent, _ = make_agent(list(steps), middlewares=[TTSMiddleware(tts)], **kwargs)
    rec = Recorder()
    msg = await agent.reply(user(), on_event=rec)
    return agent, msg, rec


async def test_a_speech_model_failing_mid_stream_closes_the_block_and_goes_silent() -> None:
    tts = BreakingTTS(good=2)
    toolkit, steps = two_text_rounds()
    _, msg, rec = await tts_reply(tts, steps, toolkit=toolkit)
    assert msg.finished_reason == ReplyFinishedReason.COMPLETED
    assert msg.get_text_content() == "Second."
    assert [str(e.type) for e in data_events(rec.events)] == [
        "DATA_BLOCK_START",
        "DATA_BLOCK_DELTA",
        "DATA_BLOCK_DELTA",
        "DATA_BLOCK_END",
    ]
    (error,) = custom_errors(rec.events)
    assert error.value == {"error": "TTSError", "message": "voice lost mid-sentence"}
    assert rec.types.index("CUSTOM") > rec.types.index("DATA_BLOCK_END")
    assert tts.texts == ["First."]  # the second block is not spoken any more
    assert "TEXT_BLOCK_END" in rec.types[rec.types.index("CUSTOM") :]  # text still flows
    assert_blocks_closed_before_the_end(rec.events)


async def test_a_speech_model_failing_with_a_plain_error_is_contained() -> None:
    _, msg, rec = await tts_reply(BreakingTTS(good=0, error=KeyError("voice")), [text_chunks("x")])
    assert msg.finished_reason == ReplyFinishedReason.COMPLETED
    assert data_events(rec.events) == []
    assert [e.value["error"] for e in custom_errors(rec.events)] == ["KeyError"]


async def test_a_synthesis_without_audio_opens_no_block() -> None:
    tts = FakeTTS([None, b""])
    _, msg, rec = await tts_reply(tts, [text_chunks("Hello")])
    assert tts.texts == ["Hello"]
    assert data_events(rec.events) == []
    assert custom_errors(rec.events) == []
    assert msg.finished_reason == ReplyFinishedReason.COMPLETED


async def test_empty_text_blocks_are_silent_in_both_modes() -> None:
    standard = FakeTTS()
    _, _, rec = await tts_reply(standard, [text_chunks("")])
    assert standard.texts == []
    assert data_events(rec.events) == []
    realtime = DirectRealtimeTTS()
    _, _, rec = await tts_reply(realtime, [text_chunks("", "")])
    assert realtime.log == []
    assert data_events(rec.events) == []


async def test_url_audio_is_passed_as_a_url_delta() -> None:
    _, _, rec = await tts_reply(URLTTS(), [text_chunks("Hi")])
    start, delta, end = data_events(rec.events)
    assert start.media_type == "audio/mpeg"
    assert (delta.data, delta.url) == (None, "https://cdn.example/a.mp3")
    assert start.block_id == delta.block_id == end.block_id


async def test_a_very_long_text_is_spoken_once_in_standard_mode() -> None:
    parts = [f"sentence {i}. " for i in range(2000)]
    tts = FakeTTS([b"A", b"B"])
    _, msg, rec = await tts_reply(tts, [text_chunks(*parts)])
    assert tts.texts == ["".join(parts)]
    assert msg.get_text_content() == "".join(parts)
    assert [str(e.type) for e in data_events(rec.events)] == [
        "DATA_BLOCK_START",
        "DATA_BLOCK_DELTA",
        "DATA_BLOCK_DELTA",
        "DATA_BLOCK_END",
    ]


async def test_a_very_long_text_streams_through_one_realtime_session() -> None:
    parts = [f"w{i} " for i in range(1000)]
    tts = DirectRealtimeTTS(on_push=lambda t: b"x")
    _, _, rec = await tts_reply(tts, [text_chunks(*parts)])
    assert tts.log[0] == "open"
    assert tts.log[-2:] == ["flush", "close"]
    assert tts.log.count("open") == 1
    assert len([e for e in rec.events if isinstance(e, DataBlockDeltaEvent)]) == 1001
    assert len({e.block_id for e in data_events(rec.events)}) == 1
    assert_blocks_closed_before_the_end(rec.events)


async def test_realtime_session_serves_every_text_block_of_a_reply(
    autojump_clock: trio.testing.MockClock,
) -> None:
    tts = ChannelRealtimeTTS(latency=0.25)
    toolkit, steps = two_text_rounds()
    _, msg, rec = await tts_reply(tts, steps, toolkit=toolkit)
    assert msg.get_text_content() == "Second."
    assert tts.log == ["connect", "close"]  # one session for both blocks
    starts = [e for e in rec.events if isinstance(e, DataBlockStartEvent)]
    assert len(starts) == 2
    assert_blocks_closed_before_the_end(rec.events)
    assert custom_errors(rec.events) == []


async def test_realtime_provider_hanging_up_after_a_flush(
    autojump_clock: trio.testing.MockClock,
) -> None:
    tts = ChannelRealtimeTTS(latency=0.25, hang_up_after_flush=True)
    toolkit, steps = two_text_rounds()
    _, msg, rec = await tts_reply(tts, steps, toolkit=toolkit)
    assert msg.finished_reason == ReplyFinishedReason.COMPLETED
    assert msg.get_text_content() == "Second."
    (error,) = custom_errors(rec.events)
    assert error.value["error"] == "TTSError"
    assert "closed the session" in error.value["message"]
    assert len([e for e in rec.events if isinstance(e, DataBlockStartEvent)]) == 1
    assert_blocks_closed_before_the_end(rec.events)
    assert tts.log == ["connect", "close"]
    no_tasks_left()


class BreakingStreamModel(ScriptedModel):
    """Streams its scripted chunks, then the connection breaks (mid reply, blocks open)."""

    async def _stream_api(self, messages: Any, tools: Any, tool_choice: Any, send: Any) -> None:
        await super()._stream_api(messages, tools, tool_choice, send)
        await self._pause()
        raise RuntimeError("model broke")


async def test_a_model_error_while_a_realtime_audio_block_is_open(
    autojump_clock: trio.testing.MockClock,
) -> None:
    tts = ChannelRealtimeTTS(latency=0.25)
    model = BreakingStreamModel([text_chunks("a", "b")], chunk_delay=1.0)
    agent, _ = make_agent(model=model, middlewares=[TTSMiddleware(tts)])
    rec = Recorder()
    with pytest.raises(RuntimeError, match="model broke"):
        await agent.reply(user(), on_event=rec)
    assert [str(e.finished_reason) for e in rec.ends] == ["error"]
    assert any(isinstance(e, DataBlockStartEvent) for e in rec.events)
    assert_blocks_closed_before_the_end(rec.events)
    assert custom_errors(rec.events) == []
    assert tts.log == ["connect", "close"]
    no_tasks_left()


@pytest.mark.parametrize("mode", ["interrupt", "outer"])
async def test_cancel_while_the_realtime_session_connects(
    mode: str, autojump_clock: trio.testing.MockClock
) -> None:
    tts = ChannelRealtimeTTS(latency=10.0)
    agent, _ = make_agent([text_chunks("a", "b")], middlewares=[TTSMiddleware(tts)])
    rec = Recorder()
    result: list[Msg] = []
    with trio.move_on_after(5 if mode == "outer" else 1000) as scope:
        async with trio.open_nursery() as nursery:

            async def run() -> None:
                result.append(await agent.reply(user(), on_event=rec))

            nursery.start_soon(run)
            if mode == "interrupt":
                await trio.sleep(5)
                agent.interrupt()
    assert scope.cancelled_caught == (mode == "outer")
    assert "connect" not in tts.log
    assert tts.log == ["close"]  # the half-open connection was closed anyway
    assert data_events(rec.events) == []
    assert [str(e.finished_reason) for e in rec.ends] == ["interrupted"]
    assert rec.events[-1] is rec.ends[0]
    if mode == "interrupt":
        assert result[0].finished_reason == ReplyFinishedReason.INTERRUPTED
    no_tasks_left()


async def test_a_realtime_connect_failure_of_the_second_session_is_contained(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # One TTS instance, two replies: the second reply's session fails to open.
    tts = ChannelRealtimeTTS(latency=0.25)
    agent, _ = make_agent(
        [text_chunks("one"), text_chunks("two")], middlewares=[TTSMiddleware(tts)]
    )
    first = Recorder()
    await agent.reply(user(), on_event=first)
    assert len(data_events(first.events)) == 4  # START, <one>, <end>, END
    tts.connect_error = OSError("tts host gone")
    second = Recorder()
    msg = await agent.reply(user(), on_event=second)
    assert msg.get_text_content() == "two"
    assert [e.value for e in custom_errors(second.events)] == [
        {"error": "OSError", "message": "tts host gone"}
    ]
    assert data_events(second.events) == []
    assert tts.log == ["connect", "close", "close"]


@pytest.mark.parametrize("mode", [CancelMode.INTERRUPT, CancelMode.OUTER])
async def test_cancel_sweep_standard_tts_across_two_text_blocks(
    mode: CancelMode, autojump_clock: trio.testing.MockClock
) -> None:
    def make() -> Agent:
        toolkit, steps = two_text_rounds()
        agent, model = make_agent(
            steps,
            toolkit=toolkit,
            middlewares=[TTSMiddleware(FakeTTS([b"A", b"B", b"C"], delay=0.5))],
        )
        model.chunk_delay = 0.25
        return agent

    def check(run: SweepRun) -> None:
        if run.events:
            assert_blocks_closed_before_the_end(run.events)
        assert custom_errors(run.events) == []

    report = await cancel_sweep(make, user, mode=mode, check=check)
    cut_while_speaking = [
        run
        for run in report.runs[1:]
        if run.end is not None
        and run.end.finished_reason == "interrupted"
        and len([e for e in run.events if isinstance(e, DataBlockDeltaEvent)]) % 3 != 0
    ]
    assert cut_while_speaking  # some cancellations landed between two audio chunks
    assert len(data_events(report.runs[0].events)) == 10


@pytest.mark.parametrize("mode", [CancelMode.INTERRUPT, CancelMode.OUTER])
async def test_cancel_sweep_a_failing_realtime_provider(
    mode: CancelMode, autojump_clock: trio.testing.MockClock
) -> None:
    def make() -> Agent:
        agent, model = make_agent(
            [text_chunks("a", "b", "c")],
            middlewares=[TTSMiddleware(ChannelRealtimeTTS(latency=0.25, fail_on="b"))],
        )
        model.chunk_delay = 0.5
        return agent

    def check(run: SweepRun) -> None:
        if run.events:
            assert_blocks_closed_before_the_end(run.events)
        assert len(custom_errors(run.events)) <= 1

    report = await cancel_sweep(make, user, mode=mode, check=check)
    assert report.runs[0].end is not None
    assert report.runs[0].end.finished_reason == "completed"
    assert len(custom_errors(report.runs[0].events)) == 1


class WrappingTTS(TTSModelBase):
    """A speech model that wraps whatever its emit raises (``raise TTSError(...) from exc``)."""

    def __init__(self) -> None:
        super().__init__("wrapping")

    async def _synthesize(self, text: str, emit: TTSEmit) -> None:
        try:
            await emit(chunk(b"AUDIO", "audio/wav"))
        except Exception as exc:
            raise TTSError(f"synthesis failed: {exc}") from exc


async def test_an_outer_failure_wrapped_by_the_speech_model_still_propagates() -> None:
    from trioagent.middleware import MiddlewareBase

    class Picky(MiddlewareBase):
        async def on_reply(
            self, agent: Any, input_kwargs: Any, next_handler: Any, emit: Any
        ) -> None:
            async def sink(item: Any) -> None:
                if isinstance(item, DataBlockDeltaEvent):
                    raise ValueError("no audio here")
                await emit(item)

            await next_handler(sink)

    agent, _ = make_agent([text_chunks("hi")], middlewares=[Picky(), TTSMiddleware(WrappingTTS())])
    with pytest.raises(ValueError, match="no audio here"):
        await agent.reply(user())
