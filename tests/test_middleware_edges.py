"""Edge cases of the built-in ModelRouter, ReplyBudgetControl and TTS middlewares
(trioagent/middleware/_router.py, _budget.py, _tts.py; tools_middleware.md §8.1, §8.3, §8.4).

Complements test_router_middleware.py, test_budget_middleware.py and test_tts_middleware.py:
odd router answers and hangs, a router shared by concurrent agents, budget limits at the
boundaries and without usage, interruptions in the wrap-up step, speech models failing mid
stream or hanging up, long and silent texts, and a cancel sweep of each middleware on its own.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Sequence
from functools import partial
from typing import Any

import pytest
import trio
import trio.testing
from agent_helpers import Recorder, assert_paired, make_agent, user
from agent_kit import confirm, tool_calls
from tts_kit import ChannelRealtimeTTS, DirectRealtimeTTS, FakeTTS, chunk

from trioagent.agent import Agent, AgentState, ModelConfig
from trioagent.classifier import (
    ChoiceAnswer,
    ClassifierModelBase,
    ClassifierResponse,
    OpenAIClassifierModel,
)
from trioagent.event import (
    AgentEvent,
    CustomEvent,
    DataBlockDeltaEvent,
    DataBlockEndEvent,
    DataBlockStartEvent,
    ReplyEndEvent,
    ReplyStartEvent,
)
from trioagent.message import DataBlock, HintBlock, Msg, TextBlock, ToolCallBlock, URLSource
from trioagent.middleware import (
    ChatModelCandidate,
    ModelRouterMiddleware,
    ReplyBudgetControlMiddleware,
    TTSMiddleware,
)
from trioagent.model import ChatResponse, ChatUsage
from trioagent.permission import PermissionBehavior, PermissionDecision
from trioagent.serialization import dumps, loads
from trioagent.testing import (
    CancelMode,
    OpenAICompatibleServer,
    RecordedRequest,
    ScriptedModel,
    SweepRun,
    cancel_sweep,
    serve_openai_compatible,
    text_chunks,
)
from trioagent.tool import Toolkit
from trioagent.tts import TTSEmit, TTSError, TTSModelBase, TTSResponse
from trioagent.types import ReplyFinishedReason, ToolChoice

ROUTER_KEY = "ModelRouterMiddleware"
BUDGET_KEY = "ReplyBudgetControlMiddleware"
ALLOW = PermissionDecision(behavior=PermissionBehavior.ALLOW, message="ok")


# -- shared helpers ----------------------------------------------------------------------------


def text(value: str, inp: int | None = None, out: int | None = None) -> ChatResponse:
    usage = None if inp is None else ChatUsage(input_tokens=inp, output_tokens=out or 0)
    return ChatResponse(content=[TextBlock(text=value)], usage=usage)


def call(call_id: str, name: str, /, **arguments: Any) -> ToolCallBlock:
    return ToolCallBlock(id=call_id, name=name, input=json.dumps(arguments))


def tool_step(*blocks: ToolCallBlock, inp: int = 0, out: int = 0) -> ChatResponse:
    return ChatResponse(content=list(blocks), usage=ChatUsage(input_tokens=inp, output_tokens=out))


def lookup_toolkit() -> Toolkit:
    toolkit = Toolkit()

    async def lookup(q: str) -> str:
        """Look something up."""
        return f"found {q}"

    toolkit.register_function(lookup, permission=ALLOW)
    return toolkit


def data_events(events: Sequence[Any]) -> list[Any]:
    return [e for e in events if str(e.type).startswith("DATA_BLOCK")]


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


async def interrupt_after(agent: Agent, inputs: Any, delay: float) -> tuple[Msg, Recorder]:
    rec = Recorder()
    result: list[Msg] = []

    async def run() -> None:
        result.append(await agent.reply(inputs, on_event=rec))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run)
        await trio.sleep(delay)
        agent.interrupt()
    return result[0], rec


def no_tasks_left() -> None:
    """Nothing the reply started still runs in the test's task tree."""
    nurseries = trio.lowlevel.current_task().child_nurseries
    assert [t for n in nurseries for t in n.child_tasks] == []


# -- ModelRouterMiddleware -------------------------------------------------------------------------


class Classifier(ClassifierModelBase):
    """Answers ``answer(text)`` after ``delay`` seconds (mock clock); records the texts."""

    def __init__(self, answer: Any, *, delay: float = 0.0) -> None:
        super().__init__("edge-classifier")
        self.answer = answer
        self.delay = delay
        self.texts: list[Any] = []

    async def __call__(self, state: Any, questions: Any, **kwargs: Any) -> ClassifierResponse:
        self.texts.append(state)
        if math.isinf(self.delay):
            await trio.sleep_forever()
        if self.delay:
            await trio.sleep(self.delay)
        else:
            await trio.lowlevel.checkpoint()
        answer = self.answer(state) if callable(self.answer) else self.answer
        if isinstance(answer, BaseException):
            raise answer
        content = {} if answer is None else {"chat_model": answer}
        return ClassifierResponse(model=self.model, content=content)


def choice(name: str) -> ChoiceAnswer:
    return ChoiceAnswer(choice=name, confidence=1.0)


def router_agent(
    classifier: ClassifierModelBase | ScriptedModel,
    *,
    default: Sequence[Any] = (),
    fast: Sequence[Any] = (),
    smart: Sequence[Any] = (),
    chunk_delay: float = 0.0,
    **kwargs: Any,
) -> tuple[Agent, dict[str, ScriptedModel]]:
    models = {
        "default": ScriptedModel(list(default), model="default-model", chunk_delay=chunk_delay),
        "fast": ScriptedModel(list(fast), model="fast-model", chunk_delay=chunk_delay),
        "smart": ScriptedModel(list(smart), model="smart-model", chunk_delay=chunk_delay),
    }
    router_kwargs = {k: kwargs.pop(k) for k in ("timeout",) if k in kwargs}
    middleware = ModelRouterMiddleware(
        classifier,
        [
            ChatModelCandidate("fast", models["fast"], "small talk"),
            ChatModelCandidate("smart", models["smart"], "hard questions"),
        ],
        **router_kwargs,
    )
    agent, _ = make_agent(model=models["default"], middlewares=[middleware], **kwargs)
    return agent, models


def test_router_construction_edges() -> None:
    model = ScriptedModel()
    with pytest.raises(ValueError, match="at least one candidate"):
        ModelRouterMiddleware(model, iter([]))  # an exhausted iterable is no candidate either
    with pytest.raises(TypeError, match="ChatModelCandidate"):
        ModelRouterMiddleware(model, [("fast", model, "x")])  # type: ignore[list-item]
    for timeout in (0, -1.0):
        with pytest.raises(ValueError, match="timeout"):
            ModelRouterMiddleware(model, [ChatModelCandidate("a", model, "x")], timeout=timeout)
    router = ModelRouterMiddleware(model, (c for c in [ChatModelCandidate("a", model, "x")]))
    assert list(router.candidates) == ["a"]


async def test_a_hanging_classifier_times_out(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    agent, models = router_agent(
        Classifier(choice("smart"), delay=math.inf), default=[text("default")], timeout=2.0
    )
    start = trio.current_time()
    with caplog.at_level(logging.WARNING, logger="trioagent.middleware"):
        msg = await agent.reply(user("hi"))
    assert trio.current_time() - start == pytest.approx(2.0)
    assert msg.get_text_content() == "default"
    assert "routing took longer than 2.0s" in caplog.text
    assert agent.state.middle_context[ROUTER_KEY] == {agent.state.reply_id: None}
    assert agent.model is models["default"]
    assert models["smart"].requests == []


async def test_a_router_just_within_the_timeout_routes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    agent, models = router_agent(
        Classifier(choice("smart"), delay=1.999), smart=[text("smart")], timeout=2.0
    )
    assert (await agent.reply(user("hi"))).get_text_content() == "smart"
    assert agent.model is models["default"]


@pytest.mark.parametrize(
    ("answer", "warning"),
    [
        (None, "None, which is not a candidate"),  # no answer for the question at all
        (ExceptionGroup("many", [ValueError("a"), KeyError("b")]), "routing failed"),
        (trio.TooSlowError(), "routing failed (TooSlowError"),
        (choice("Fast"), "'Fast', which is not a candidate"),  # names are case-sensitive
        (ChoiceAnswer(choice=7, confidence=1.0), "7, which is not a candidate"),  # type: ignore[arg-type]
    ],
    ids=["no-answer", "exception-group", "own-timeout", "wrong-case", "int-choice"],
)
async def test_odd_classifier_outcomes_keep_the_agents_model(
    answer: Any, warning: str, caplog: pytest.LogCaptureFixture
) -> None:
    agent, models = router_agent(Classifier(answer), default=[text("default answer")])
    rec = Recorder()
    with caplog.at_level(logging.WARNING, logger="trioagent.middleware"):
        msg = await agent.reply(user("hi"), on_event=rec)
    assert msg.get_text_content() == "default answer"
    assert [str(e.finished_reason) for e in rec.ends] == ["completed"]
    assert warning in caplog.text
    assert agent.state.middle_context[ROUTER_KEY] == {agent.state.reply_id: None}
    assert agent.model is models["default"]


@pytest.mark.parametrize(
    "payload",
    [{"choice": 3}, {"choice": None}, {"choice": ["fast"]}, {"other": "fast"}],
    ids=["int", "null", "list", "missing"],
)
async def test_a_chat_router_with_a_malformed_choice_falls_back(payload: dict[str, Any]) -> None:
    router = ScriptedModel(
        [
            ChatResponse(
                content=[
                    ToolCallBlock(
                        id="r", name="generate_structured_output", input=json.dumps(payload)
                    )
                ]
            )
        ],
        model="router",
    )
    agent, models = router_agent(router, default=[text("default")])
    msg = await agent.reply(user("hi"))
    assert msg.get_text_content() == "default"
    assert agent.state.middle_context[ROUTER_KEY] == {agent.state.reply_id: None}
    assert agent.model is models["default"]


async def test_the_routed_models_failure_goes_to_the_agents_fallback_model() -> None:
    backup = ScriptedModel([text("backup answer")], model="backup")
    agent, models = router_agent(
        Classifier(choice("fast")),
        fast=[RuntimeError("fast is down")],
        model_config=ModelConfig(fallback_model=backup),
    )
    rec = Recorder()
    msg = await agent.reply(user("hi"), on_event=rec)
    assert msg.get_text_content() == "backup answer"
    assert len(models["fast"].requests) == 1
    assert models["default"].requests == []
    assert agent.model is models["default"]
    assert [str(e.finished_reason) for e in rec.ends] == ["completed"]


async def test_a_model_swapped_between_replies_is_what_gets_restored() -> None:
    agent, _ = router_agent(Classifier(choice("fast")), fast=[text("one"), text("two")])
    await agent.reply(user("a"))
    replacement = ScriptedModel([], model="replacement")
    agent.model = replacement
    assert (await agent.reply(user("b"))).get_text_content() == "two"
    assert agent.model is replacement


async def test_two_agents_share_one_router_concurrently(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # Both replies are inside the routing call at the same time; each gets its own pick.
    classifier = Classifier(lambda t: choice("smart" if "hard" in t else "fast"), delay=1.0)
    fast = ScriptedModel([text_chunks("quick", " one")], model="fast-model", chunk_delay=0.5)
    smart = ScriptedModel([text_chunks("deep", " one")], model="smart-model", chunk_delay=0.5)
    middleware = ModelRouterMiddleware(
        classifier,
        [ChatModelCandidate("fast", fast, "easy"), ChatModelCandidate("smart", smart, "hard")],
    )
    default_a = ScriptedModel([], model="default-a")
    default_b = ScriptedModel([], model="default-b")
    agent_a, _ = make_agent(model=default_a, middlewares=[middleware])
    agent_b, _ = make_agent(model=default_b, middlewares=[middleware])
    results: dict[str, Msg] = {}
    during: list[tuple[Any, Any]] = []

    async def run(name: str, agent: Agent, question: str) -> None:
        results[name] = await agent.reply(user(question))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run, "a", agent_a, "easy thing")
        nursery.start_soon(run, "b", agent_b, "hard thing")
        await trio.sleep(1.2)  # both routed, both streaming
        during.append((agent_a.model, agent_b.model))
    assert sorted(classifier.texts) == ["easy thing", "hard thing"]
    assert during == [(fast, smart)]
    assert results["a"].get_text_content() == "quick one"
    assert results["b"].get_text_content() == "deep one"
    assert agent_a.model is default_a
    assert agent_b.model is default_b
    assert agent_a.state.middle_context[ROUTER_KEY] == {agent_a.state.reply_id: "fast"}
    assert agent_b.state.middle_context[ROUTER_KEY] == {agent_b.state.reply_id: "smart"}
    assert vars(middleware).keys() == {
        "classifier_model",
        "candidates",
        "instructions",
        "timeout",
        "question",
        "prompt",
        "schema",
    }


async def test_interrupt_while_the_routed_model_calls_a_tool_restores_and_pairs(
    autojump_clock: trio.testing.MockClock,
) -> None:
    toolkit = Toolkit()

    async def slow(q: str) -> str:
        """Slow tool."""
        await trio.sleep(100)
        return q

    toolkit.register_function(slow, permission=ALLOW)
    agent, models = router_agent(
        Classifier(choice("smart")),
        smart=[ChatResponse(content=[call("c1", "slow", q="x")])],
        toolkit=toolkit,
    )
    msg, rec = await interrupt_after(agent, user("go"), 10)
    assert msg.finished_reason == ReplyFinishedReason.INTERRUPTED
    assert [str(e.finished_reason) for e in rec.ends] == ["interrupted"]
    assert agent.model is models["default"]
    assert_paired(agent.state.context)
    restored = loads(dumps(agent.state), AgentState)
    assert restored.middle_context[ROUTER_KEY] == {agent.state.reply_id: "smart"}
    no_tasks_left()


async def test_interrupt_while_an_http_classifier_routes_closes_its_connection(
    nursery: trio.Nursery,
) -> None:
    server: OpenAICompatibleServer = await nursery.start(
        partial(serve_openai_compatible, [], api_key="sk-route")
    )
    seen: list[RecordedRequest] = []

    async def stall(request: RecordedRequest) -> Any:
        seen.append(request)
        await trio.sleep_forever()

    server.add_route("POST", "/v1/decisions", stall)
    async with OpenAIClassifierModel(credential=server.credential()) as classifier:
        agent, models = router_agent(classifier)
        rec = Recorder()
        result: list[Msg] = []

        async def run() -> None:
            result.append(await agent.reply(user("route me"), on_event=rec))

        async with trio.open_nursery() as inner:
            inner.start_soon(run)
            await server.wait_until(lambda: bool(seen))
            agent.interrupt()
        pool = classifier.http_client._transport._pool  # type: ignore[attr-defined]
        assert [c for c in pool.connections if not (c.is_idle() or c.is_closed())] == []
    with trio.fail_after(5):  # a guard: the server notices the closed socket at once
        await server.wait_all_closed()
    assert result[0].finished_reason == ReplyFinishedReason.INTERRUPTED
    assert rec.types == ["REPLY_START", "REPLY_END"]
    assert agent.model is models["default"]
    assert ROUTER_KEY not in agent.state.middle_context  # cut before a choice was made


@pytest.mark.parametrize("mode", [CancelMode.INTERRUPT, CancelMode.OUTER])
async def test_cancel_sweep_router_with_a_classifier(
    mode: CancelMode, autojump_clock: trio.testing.MockClock
) -> None:
    defaults: dict[int, ScriptedModel] = {}

    def make() -> Agent:
        agent, models = router_agent(
            Classifier(choice("smart"), delay=0.5),
            smart=[
                ChatResponse(content=[call("c1", "lookup", q="x")]),
                text_chunks("an", "swer"),
            ],
            toolkit=lookup_toolkit(),
            chunk_delay=0.25,
            timeout=5.0,
        )
        defaults[id(agent)] = models["default"]
        return agent

    def check(run: SweepRun) -> None:
        agent = run.agent
        assert agent.model is defaults[id(agent)], "the agent's model was not restored"
        assert defaults[id(agent)].requests == []  # the default model never answered
        started = [e for e in run.events if isinstance(e, ReplyStartEvent)]
        stored = agent.state.middle_context.get(ROUTER_KEY)
        if started and stored is not None:
            assert set(stored) == {started[0].reply_id}
            assert stored[started[0].reply_id] in ("smart", None)

    report = await cancel_sweep(make, lambda: user("hard one"), mode=mode, check=check)
    assert report.runs[0].end is not None
    assert report.runs[0].end.finished_reason == "completed"
    assert report.outcomes["interrupted"] > 5


# -- ReplyBudgetControlMiddleware ------------------------------------------------------------------


def budget_agent(steps: Sequence[Any], budget: float, **kwargs: Any) -> tuple[Agent, ScriptedModel]:
    weights = {
        k: kwargs.pop(k) for k in ("input_token_weight", "output_token_weight") if k in kwargs
    }
    return make_agent(
        list(steps),
        middlewares=[ReplyBudgetControlMiddleware(budget, **weights)],
        **kwargs,
    )


def budget_hints(msgs: Sequence[Msg]) -> list[HintBlock]:
    return [
        b
        for m in msgs
        for b in m.content
        if isinstance(b, HintBlock) and "maximum token budget" in str(b.hint)
    ]


async def test_a_model_without_usage_costs_nothing() -> None:
    agent, model = budget_agent(
        [tool_step(call("c1", "lookup", q="x")), text("done")],
        budget=1,
        toolkit=lookup_toolkit(),
    )
    # The tool step reports 0/0 tokens, the answer no usage at all.
    msg = await agent.reply(user())
    assert msg.get_text_content() == "done"
    assert [r.tool_choice for r in model.requests] == [None, None]
    assert agent.state.middle_context[BUDGET_KEY] == {agent.state.reply_id: 0}


async def test_no_usage_and_a_zero_budget_still_triggers_every_step() -> None:
    agent, model = budget_agent(
        [ChatResponse(content=[call("c1", "lookup", q="x")]), text("done")],
        budget=0,
        toolkit=lookup_toolkit(),
    )
    msg = await agent.reply(user())
    assert msg.get_text_content() == "done"
    assert [r.tool_choice for r in model.requests] == [ToolChoice("none"), ToolChoice("none")]
    assert len(budget_hints(model.requests[1].messages)) == 2
    assert agent.state.middle_context[BUDGET_KEY] == {agent.state.reply_id: 0}


async def test_zero_weights_never_exhaust_a_positive_budget() -> None:
    agent, model = budget_agent(
        [tool_step(call("c1", "lookup", q="x"), inp=10**9, out=10**9), text("done", 5, 5)],
        budget=1,
        input_token_weight=0,
        output_token_weight=0,
        toolkit=lookup_toolkit(),
    )
    await agent.reply(user())
    assert model.requests[1].tool_choice is None
    assert agent.state.middle_context[BUDGET_KEY] == {agent.state.reply_id: 0}


@pytest.mark.parametrize(
    ("budget", "exhausted"),
    [(17.5, True), (17.500001, False), (17, True)],
    ids=["exactly", "a-hair-above", "below"],
)
async def test_a_fractional_cost_exactly_at_the_budget_exhausts_it(
    budget: float, exhausted: bool
) -> None:
    agent, model = budget_agent(
        [tool_step(call("c1", "lookup", q="x"), inp=10, out=5), text("done", 0, 0)],
        budget=budget,
        input_token_weight=1.0,
        output_token_weight=1.5,
        toolkit=lookup_toolkit(),
    )
    await agent.reply(user())
    assert (model.requests[1].tool_choice == ToolChoice("none")) is exhausted
    assert agent.state.middle_context[BUDGET_KEY] == {agent.state.reply_id: 17.5}


async def test_a_corrupt_saved_cost_counts_as_zero_on_resume() -> None:
    toolkit = Toolkit()

    async def deploy(target: str) -> str:
        """Deploy (asks first)."""
        return target

    toolkit.register_function(deploy)
    mw = ReplyBudgetControlMiddleware(token_budget=300)
    agent, _ = make_agent(
        [tool_step(call("d1", "deploy", target="x"), inp=300, out=0)],
        toolkit=toolkit,
        middlewares=[mw],
    )
    await agent.reply(user())
    reply_id = agent.state.reply_id
    assert agent.state.middle_context[BUDGET_KEY] == {reply_id: 300}
    state = loads(dumps(agent.state), AgentState)
    state.middle_context[BUDGET_KEY] = {reply_id: "three hundred"}
    resumed, resumed_model = make_agent(
        [text("done", 1, 1)], toolkit=toolkit, middlewares=[mw], state=state
    )
    msg = await resumed.reply(confirm(tool_calls(resumed)["d1"]))
    assert msg.get_text_content() == "done"
    assert await mw.used(resumed) == 2
    assert resumed_model.requests[0].tool_choice is None


async def test_interrupt_in_the_wrap_up_step(autojump_clock: trio.testing.MockClock) -> None:
    agent, model = budget_agent(
        [
            tool_step(call("c1", "lookup", q="x"), inp=200, out=100),
            text_chunks(
                "wrapping", " up", " now", usage=ChatUsage(input_tokens=9, output_tokens=9)
            ),
            text("next reply", 1, 1),
        ],
        budget=300,
        toolkit=lookup_toolkit(),
    )
    model.chunk_delay = 1.0
    msg, rec = await interrupt_after(agent, user("one"), 1.5)
    assert msg.finished_reason == ReplyFinishedReason.INTERRUPTED
    assert [str(e.finished_reason) for e in rec.ends] == ["interrupted"]
    first_id = agent.state.reply_id
    wrap_up = model.requests[1]
    assert wrap_up.tool_choice == ToolChoice("none")
    assert len(budget_hints(agent.state.context)) == 1  # added once, before the cut step
    assert agent.state.middle_context[BUDGET_KEY][first_id] >= 300
    assert_paired(agent.state.context)

    # Saved and restored, the next reply starts from zero: no wrap-up forced on it.
    restored = loads(dumps(agent.state), AgentState)
    agent2, model2 = budget_agent([text("fresh", 1, 1)], budget=300, state=restored)
    assert (await agent2.reply(user("two"))).get_text_content() == "fresh"
    assert model2.requests[0].tool_choice is None
    assert agent2.state.middle_context[BUDGET_KEY] == {agent2.state.reply_id: 2}
    assert first_id not in agent2.state.middle_context[BUDGET_KEY]
    no_tasks_left()


async def test_two_agents_share_one_budget_concurrently(
    autojump_clock: trio.testing.MockClock,
) -> None:
    mw = ReplyBudgetControlMiddleware(token_budget=100)
    big, big_model = make_agent(
        [tool_step(call("c1", "lookup", q="x"), inp=100, out=0), text("big done", 1, 1)],
        toolkit=lookup_toolkit(),
        middlewares=[mw],
    )
    small, small_model = make_agent(
        [tool_step(call("c1", "lookup", q="x"), inp=1, out=0), text("small done", 1, 1)],
        toolkit=lookup_toolkit(),
        middlewares=[mw],
    )
    big_model.chunk_delay = small_model.chunk_delay = 1.0
    async with trio.open_nursery() as nursery:
        nursery.start_soon(big.reply, user())
        nursery.start_soon(small.reply, user())
    assert big_model.requests[1].tool_choice == ToolChoice("none")
    assert small_model.requests[1].tool_choice is None
    assert big.state.middle_context[BUDGET_KEY] == {big.state.reply_id: 102}
    assert small.state.middle_context[BUDGET_KEY] == {small.state.reply_id: 3}


@pytest.mark.parametrize("mode", [CancelMode.INTERRUPT, CancelMode.OUTER])
async def test_cancel_sweep_budget_wrap_up(
    mode: CancelMode, autojump_clock: trio.testing.MockClock
) -> None:
    def make() -> Agent:
        agent, model = budget_agent(
            [
                tool_step(call("c1", "lookup", q="x"), inp=200, out=100),
                text_chunks("wrap", "ped", usage=ChatUsage(input_tokens=5, output_tokens=5)),
            ],
            budget=300,
            toolkit=lookup_toolkit(),
        )
        model.chunk_delay = 0.25
        return agent

    def check(run: SweepRun) -> None:
        agent = run.agent
        model = agent.model
        hints = budget_hints(agent.state.context)
        assert len(hints) <= 1
        if len(model.requests) == 2:
            assert model.requests[1].tool_choice == ToolChoice("none")
        started = [e for e in run.events if isinstance(e, ReplyStartEvent)]
        if started:
            bucket = agent.state.middle_context[BUDGET_KEY]
            assert set(bucket) == {started[0].reply_id}
            assert bucket[started[0].reply_id] in (0, 300, 310)
            if hints:
                assert bucket[started[0].reply_id] >= 300

    report = await cancel_sweep(make, user, mode=mode, check=check)
    assert report.runs[0].end is not None
    assert report.runs[0].end.finished_reason == "completed"
    assert report.outcomes["interrupted"] > 5


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


# -- found by this hunt, fixed ---------------------------------------------------------------------


class ListChoice(ClassifierModelBase):
    """A custom classifier answering a list where a candidate name belongs."""

    def __init__(self) -> None:
        super().__init__("odd")

    async def __call__(self, state: Any, questions: Any, **kwargs: Any) -> ClassifierResponse:
        await trio.lowlevel.checkpoint()
        return ClassifierResponse(
            model=self.model, content={"chat_model": ChoiceAnswer(choice=["fast"], confidence=1.0)}
        )


async def test_an_unhashable_choice_falls_back_to_the_agents_model() -> None:
    default = ScriptedModel([ChatResponse(content=[TextBlock(text="default")])], model="default")
    fast = ScriptedModel([], model="fast")
    mw = ModelRouterMiddleware(ListChoice(), [ChatModelCandidate("fast", fast, "x")])
    agent, _ = make_agent(model=default, middlewares=[mw])
    msg = await agent.reply(user("hi"))
    assert msg.get_text_content() == "default"
    assert agent.model is default


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


@pytest.mark.parametrize("field", ["token_budget", "input_token_weight", "output_token_weight"])
def test_a_nan_budget_or_weight_is_rejected(field: str) -> None:
    kwargs: dict[str, Any] = {"token_budget": 100.0, field: math.nan}
    with pytest.raises(ValueError, match="non-negative number"):
        ReplyBudgetControlMiddleware(**kwargs)
