"""ModelRouterMiddleware (trioagent/middleware/_router.py): one routing per reply, the
choice kept across park/resume (and a JSON round trip), the agent's own model restored
afterwards, and the fallback to it on any router failure; and the edge cases (odd or hanging
classifiers, a router shared by concurrent agents, interruptions while routing, cancel
sweeps)."""

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
from agent_kit import ALLOW, call, confirm, tool_calls
from middleware_kit import interrupt_after, lookup_toolkit, no_tasks_left, text
from provider_kit import open_connections

from trioagent.agent import Agent, AgentState, ModelConfig
from trioagent.classifier import (
    ChoiceAnswer,
    ChoiceQuestion,
    ClassifierModelBase,
    ClassifierResponse,
    OpenAIClassifierModel,
    Question,
    RefusalAnswer,
)
from trioagent.event import (
    ReplyStartEvent,
)
from trioagent.message import (
    AssistantMsg,
    Base64Source,
    DataBlock,
    Msg,
    TextBlock,
    ToolCallBlock,
    UserMsg,
)
from trioagent.middleware import (
    ChatModelCandidate,
    ModelRouterMiddleware,
)
from trioagent.model import ChatResponse
from trioagent.permission import PermissionBehavior, PermissionDecision
from trioagent.serialization import dumps, loads
from trioagent.testing import (
    CancelMode,
    OpenAICompatibleServer,
    RecordedRequest,
    ScriptedModel,
    ScriptedResponse,
    SweepRun,
    cancel_sweep,
    serve_openai_compatible,
    text_chunks,
)
from trioagent.tool import Toolkit
from trioagent.types import ReplyFinishedReason

KEY = "ModelRouterMiddleware"
INSTRUCTIONS = "Select the most suitable chat model for responding to the user input."


def pick(name: str) -> ChatResponse:
    """What a chat-model router answers: the structured-output tool call."""
    return ChatResponse(
        content=[
            ToolCallBlock(
                id="route-1", name="generate_structured_output", input=json.dumps({"choice": name})
            )
        ]
    )


class FakeClassifier(ClassifierModelBase):
    """Answers every call with ``answer`` (or raises it); records the calls."""

    def __init__(self, answer: Any) -> None:
        super().__init__("fake-classifier")
        self.answer = answer
        self.calls: list[tuple[Any, dict[str, Question]]] = []

    async def __call__(self, state: Any, questions: Any, **kwargs: Any) -> ClassifierResponse:
        self.calls.append((state, dict(questions)))
        await trio.lowlevel.checkpoint()
        if isinstance(self.answer, BaseException):
            raise self.answer
        return ClassifierResponse(model=self.model, content={"chat_model": self.answer})


class Setup:
    """A default model, ``fast`` and ``smart`` candidates, and the router."""

    def __init__(
        self,
        router: ClassifierModelBase | ScriptedModel,
        *,
        default: list[Any] | None = None,
        fast: list[Any] | None = None,
        smart: list[Any] | None = None,
        toolkit: Toolkit | None = None,
        **router_kwargs: Any,
    ) -> None:
        self.default = ScriptedModel(default or [], model="default-model")
        self.fast = ScriptedModel(fast or [], model="fast-model")
        self.smart = ScriptedModel(smart or [], model="smart-model")
        self.router = router
        self.middleware = ModelRouterMiddleware(
            router,
            [
                ChatModelCandidate("fast", self.fast, "small talk"),
                ChatModelCandidate("smart", self.smart, "math and code"),
            ],
            **router_kwargs,
        )
        self.agent = self.make_agent(toolkit=toolkit)

    def make_agent(self, state: AgentState | None = None, toolkit: Toolkit | None = None) -> Agent:
        agent, _ = make_agent(
            model=self.default, middlewares=[self.middleware], toolkit=toolkit, state=state
        )
        return agent

    def stored(self, agent: Agent | None = None) -> Any:
        agent = agent or self.agent
        return agent.state.middle_context.get(KEY)


# -- construction --------------------------------------------------------------------------------


def test_duplicate_candidate_names_are_rejected() -> None:
    model = ScriptedModel()
    with pytest.raises(ValueError, match=r"Duplicate chat model candidates: \['a'\]"):
        ModelRouterMiddleware(
            model, [ChatModelCandidate("a", model, "x"), ChatModelCandidate("a", model, "y")]
        )
    with pytest.raises(ValueError, match="at least one candidate"):
        ModelRouterMiddleware(model, [])
    with pytest.raises(TypeError, match="ClassifierModelBase or a ChatModelBase"):
        ModelRouterMiddleware(3, [ChatModelCandidate("a", model, "x")])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"classifier_model: .*'<provider>:<model>'.*'gpt'"):
        ModelRouterMiddleware("gpt", [ChatModelCandidate("a", model, "x")])
    with pytest.raises(ValueError, match="non-empty"):
        ChatModelCandidate("", model, "x")


def test_prompt_and_schema_follow_agentscope() -> None:
    model = ScriptedModel()
    router = ModelRouterMiddleware(
        model,
        [ChatModelCandidate("fast", model, "日常问答"), ChatModelCandidate("smart", model, "math")],
    )
    assert router.prompt == (
        f"{INSTRUCTIONS}\n\nSelect exactly one candidate using these criteria:\n"
        '{\n  "fast": "日常问答",\n  "smart": "math"\n}'
    )
    assert router.schema == {
        "type": "object",
        "properties": {"choice": {"type": "string", "enum": ["fast", "smart"]}},
        "required": ["choice"],
        "additionalProperties": False,
    }
    assert router.question == ChoiceQuestion(
        criteria={"fast": "日常问答", "smart": "math"}, instructions=INSTRUCTIONS
    )


# -- routing -----------------------------------------------------------------------------------------


async def test_chat_model_router_picks_the_model_of_the_reply() -> None:
    router = ScriptedModel([pick("fast")], model="router")
    setup = Setup(router, fast=[text_chunks("quick answer")])
    rec = Recorder()
    msg = await setup.agent.reply(user("hello there"), on_event=rec)
    assert msg.get_text_content() == "quick answer"
    assert setup.agent.model is setup.default  # restored
    assert setup.stored() == {setup.agent.state.reply_id: "fast"}
    assert setup.default.requests == []
    assert len(setup.fast.requests) == 1
    (request,) = router.requests
    assert request.messages[0].get_text_content() == setup.middleware.prompt
    assert "hello there" in (request.messages[1].get_text_content() or "")
    assert request.tools is not None
    assert request.tools[0]["function"]["parameters"] == setup.middleware.schema
    # The reply started before routing; the routed model made the call.
    assert rec.types[:2] == ["REPLY_START", "MODEL_CALL_START"]
    assert rec.events[1].model_name == "fast-model"  # type: ignore[union-attr]


async def test_classifier_router_asks_one_choice_question() -> None:
    classifier = FakeClassifier(ChoiceAnswer(choice="smart", confidence=0.9))
    setup = Setup(classifier, smart=[text("4")], instructions="Route it.")
    msg = await setup.agent.reply(user("what is 2+2?"))
    assert msg.get_text_content() == "4"
    assert classifier.calls == [
        (
            "what is 2+2?",
            {
                "chat_model": ChoiceQuestion(
                    criteria={"fast": "small talk", "smart": "math and code"},
                    instructions="Route it.",
                )
            },
        )
    ]
    assert setup.stored() == {setup.agent.state.reply_id: "smart"}
    assert setup.agent.model is setup.default


async def test_routing_uses_the_latest_user_message() -> None:
    classifier = FakeClassifier(ChoiceAnswer(choice="fast", confidence=1.0))
    setup = Setup(classifier, fast=[text("ok")])
    await setup.agent.reply(
        [user("first question"), AssistantMsg("assistant", "noted"), user("second question")]
    )
    assert classifier.calls[0][0] == "second question"


async def test_the_whole_reply_uses_the_routed_model() -> None:
    toolkit = Toolkit()

    async def lookup(q: str) -> str:
        """Look something up."""
        return f"found {q}"

    toolkit.register_function(
        lookup, permission=PermissionDecision(behavior=PermissionBehavior.ALLOW, message="ok")
    )
    call = ToolCallBlock(id="c1", name="lookup", input='{"q": "x"}')
    setup = Setup(
        FakeClassifier(ChoiceAnswer(choice="smart", confidence=1.0)),
        smart=[ChatResponse(content=[call]), text("done")],
        toolkit=toolkit,
    )
    msg = await setup.agent.reply(user("research x"))
    assert msg.get_text_content() == "done"
    assert len(setup.smart.requests) == 2  # both reasoning steps
    assert setup.default.requests == []


# -- fallbacks --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "warning"),
    [
        (ChoiceAnswer(choice="turbo", confidence=0.99), "'turbo', which is not a candidate"),
        (RefusalAnswer(), "None, which is not a candidate"),
        (RuntimeError("classifier down"), "routing failed (RuntimeError: classifier down)"),
    ],
)
async def test_router_failures_keep_the_agents_own_model(
    answer: Any, warning: str, caplog: pytest.LogCaptureFixture
) -> None:
    setup = Setup(FakeClassifier(answer), default=[text("default answer")])
    with caplog.at_level(logging.WARNING, logger="trioagent.middleware"):
        msg = await setup.agent.reply(user("hi"))
    assert msg.get_text_content() == "default answer"
    assert msg.finished_reason == ReplyFinishedReason.COMPLETED
    assert setup.stored() == {setup.agent.state.reply_id: None}
    assert warning in caplog.text
    assert setup.agent.model is setup.default


async def test_chat_router_error_and_unknown_pick_fall_back() -> None:
    router = ScriptedModel([pick("turbo"), RuntimeError("router down")], model="router")
    setup = Setup(router, default=[text("one"), text("two")])
    assert (await setup.agent.reply(user("a"))).get_text_content() == "one"
    assert setup.stored() == {setup.agent.state.reply_id: None}
    assert (await setup.agent.reply(user("b"))).get_text_content() == "two"
    assert setup.stored() == {setup.agent.state.reply_id: None}
    router.assert_consumed()


@pytest.mark.parametrize(
    "inputs",
    [
        None,
        UserMsg("user", [DataBlock(source=Base64Source(data="QUJD", media_type="image/png"))]),
        UserMsg("user", "   "),
        [AssistantMsg("assistant", "just context")],
    ],
    ids=["none", "image-only", "blank", "no-user-msg"],
)
async def test_no_user_text_means_no_routing(inputs: Any) -> None:
    classifier = FakeClassifier(ChoiceAnswer(choice="smart", confidence=1.0))
    setup = Setup(classifier, default=[text("default")])
    msg = await setup.agent.reply(inputs)
    assert msg.get_text_content() == "default"
    assert classifier.calls == []
    assert setup.stored() == {setup.agent.state.reply_id: None}


async def test_a_slow_router_times_out_to_the_agents_model(
    autojump_clock: trio.testing.MockClock,
) -> None:
    router = ScriptedModel([pick("smart")], model="router", chunk_delay=60.0)
    setup = Setup(router, default=[text("default")], timeout=5.0)
    start = trio.current_time()
    msg = await setup.agent.reply(user("hi"))
    assert msg.get_text_content() == "default"
    assert trio.current_time() - start == pytest.approx(5.0)
    assert setup.stored() == {setup.agent.state.reply_id: None}


async def test_each_new_reply_routes_again_and_replaces_the_entry() -> None:
    classifier = FakeClassifier(ChoiceAnswer(choice="fast", confidence=1.0))
    setup = Setup(classifier, fast=[text("one")], smart=[text("two")])
    await setup.agent.reply(user("a"))
    first = setup.agent.state.reply_id
    classifier.answer = ChoiceAnswer(choice="smart", confidence=1.0)
    msg = await setup.agent.reply(user("b"))
    assert msg.get_text_content() == "two"
    assert setup.stored() == {setup.agent.state.reply_id: "smart"}
    assert first not in setup.stored()


# -- park / resume ------------------------------------------------------------------------------------


def asking_toolkit() -> Toolkit:
    toolkit = Toolkit()

    async def deploy(target: str) -> str:
        """Deploy (needs the user's confirmation)."""
        return f"deployed {target}"

    toolkit.register_function(deploy)
    return toolkit


async def test_the_choice_survives_a_park_and_a_json_round_trip() -> None:
    call = ToolCallBlock(id="d1", name="deploy", input='{"target": "prod"}')
    classifier = FakeClassifier(ChoiceAnswer(choice="smart", confidence=1.0))
    setup = Setup(
        classifier,
        smart=[ChatResponse(content=[call]), text("deployed!")],
        toolkit=asking_toolkit(),
    )
    rec = Recorder()
    parked = await setup.agent.reply(user("deploy to prod"), on_event=rec)
    assert rec.types[-1] == "REQUIRE_USER_CONFIRM"
    assert parked.finished_reason is None
    assert setup.agent.model is setup.default  # restored while parked
    reply_id = setup.agent.state.reply_id
    assert setup.stored() == {reply_id: "smart"}

    # A new agent from the JSON state resumes with the stored choice, without routing again.
    restored = loads(dumps(setup.agent.state), AgentState)
    agent = setup.make_agent(state=restored, toolkit=asking_toolkit())
    assert setup.stored(agent) == {reply_id: "smart"}
    resumed = Recorder()
    msg = await agent.reply(confirm(tool_calls(agent)["d1"]), on_event=resumed)
    assert "REPLY_START" not in resumed.types
    assert msg.get_text_content() == "deployed!"
    assert msg.finished_reason == ReplyFinishedReason.COMPLETED
    assert len(classifier.calls) == 1
    assert len(setup.smart.requests) == 2
    assert setup.default.requests == []
    assert agent.model is setup.default


async def test_resume_with_a_stored_name_that_is_no_candidate(
    caplog: pytest.LogCaptureFixture,
) -> None:
    call = ToolCallBlock(id="d1", name="deploy", input='{"target": "prod"}')
    setup = Setup(
        FakeClassifier(ChoiceAnswer(choice="smart", confidence=1.0)),
        smart=[ChatResponse(content=[call])],
        default=[text("default continues")],
        toolkit=asking_toolkit(),
    )
    await setup.agent.reply(user("deploy"))
    setup.agent.state.middle_context[KEY] = {setup.agent.state.reply_id: "retired-model"}
    with caplog.at_level(logging.WARNING, logger="trioagent.middleware"):
        msg = await setup.agent.reply(confirm(tool_calls(setup.agent)["d1"]))
    assert msg.get_text_content() == "default continues"
    assert "'retired-model' is not a candidate" in caplog.text


# -- the agent's model is restored after an interruption or an error ------------------------------


async def test_model_restored_after_an_interruption(autojump_clock: trio.testing.MockClock) -> None:
    setup = Setup(FakeClassifier(ChoiceAnswer(choice="smart", confidence=1.0)))
    setup.smart.chunk_delay = 1.0
    setup.smart.add_steps(text_chunks("a", "b", "c", "d"))
    seen_during: list[Any] = []
    rec = Recorder()

    async def interrupt_later() -> None:
        await trio.sleep(2.5)
        seen_during.append(setup.agent.model)
        setup.agent.interrupt()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(interrupt_later)
        msg = await setup.agent.reply(user("go"), on_event=rec)
    assert seen_during == [setup.smart]
    assert msg.finished_reason == ReplyFinishedReason.INTERRUPTED
    assert [str(e.finished_reason) for e in rec.ends] == ["interrupted"]
    assert setup.agent.model is setup.default


async def test_model_restored_after_an_outer_cancellation(
    autojump_clock: trio.testing.MockClock,
) -> None:
    setup = Setup(FakeClassifier(ChoiceAnswer(choice="fast", confidence=1.0)))
    setup.fast.chunk_delay = 1.0
    setup.fast.add_steps(text_chunks("a", "b", "c"))
    rec = Recorder()
    with trio.move_on_after(1.5) as scope:
        await setup.agent.reply(user("go"), on_event=rec)
    assert scope.cancelled_caught
    assert rec.types[-1] == "REPLY_END"
    assert setup.agent.model is setup.default


async def test_model_restored_after_an_error() -> None:
    setup = Setup(
        FakeClassifier(ChoiceAnswer(choice="fast", confidence=1.0)),
        fast=[ValueError("fast model broke")],
    )
    rec = Recorder()
    with pytest.raises(ValueError, match="fast model broke"):
        await setup.agent.reply(user("go"), on_event=rec)
    assert [str(e.finished_reason) for e in rec.ends] == ["error"]
    assert setup.agent.model is setup.default


async def test_interrupt_while_routing_ends_the_started_reply(
    autojump_clock: trio.testing.MockClock,
) -> None:
    router = ScriptedModel([pick("smart")], model="router", chunk_delay=60.0)
    setup = Setup(router)
    rec = Recorder()

    async def interrupt_later() -> None:
        await trio.sleep(1)
        setup.agent.interrupt()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(interrupt_later)
        msg = await setup.agent.reply(user("go"), on_event=rec)
    assert msg.finished_reason == ReplyFinishedReason.INTERRUPTED
    assert rec.types == ["REPLY_START", "REPLY_END"]
    assert setup.agent.model is setup.default
    assert setup.smart.requests == []


# -- end to end with the OpenAI classifier over HTTP ---------------------------------------------------


async def test_openai_classifier_routes_over_http(nursery: trio.Nursery) -> None:
    server: OpenAICompatibleServer = await nursery.start(
        partial(serve_openai_compatible, [], api_key="sk-route-1234")
    )
    seen: list[RecordedRequest] = []

    def decide(request: RecordedRequest) -> ScriptedResponse:
        seen.append(request)
        return ScriptedResponse.json(
            {
                "answers": [
                    {
                        "type": "choice",
                        "name": "chat_model",
                        "probabilities": [
                            {"value": "fast", "probability": 0.15},
                            {"value": "smart", "probability": 0.85},
                        ],
                    }
                ]
            }
        )

    server.add_route("POST", "/v1/decisions", decide)
    async with OpenAIClassifierModel(credential=server.credential()) as classifier:
        setup = Setup(classifier, smart=[text("integral solved")])
        msg = await setup.agent.reply(user("integrate x^2"))
    assert msg.get_text_content() == "integral solved"
    assert seen[0].body["input"] == "integrate x^2"
    assert seen[0].body["questions"][0]["name"] == "chat_model"
    assert setup.stored() == {setup.agent.state.reply_id: "smart"}


ROUTER_KEY = "ModelRouterMiddleware"


# -- shared helpers ----------------------------------------------------------------------------


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
        pool = open_connections(classifier.http_client)
        assert [c for c in pool if not (c.is_idle() or c.is_closed())] == []
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
