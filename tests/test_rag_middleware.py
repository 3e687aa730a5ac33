"""RAGMiddleware: static and agentic mode over an in-memory store and a stub embedding model
with fixed vectors, the rerank, and the Trio guarantees: per-reply state (one instance, many
agents), cancellation during the static search, checkpoint sweeps, and an agentic reply
through the agent loop; and the edge cases (a failing knowledge base, hints merged across
bases, a cancel sweep over a multi-batch static search)."""

from __future__ import annotations

import copy
import json
import logging
from typing import Any

import attrs
import pytest
import trio
import trio.testing
from agent_helpers import ALLOW, NO_INJECTION, Recorder

from trioagent import UserMsg
from trioagent.agent import Agent
from trioagent.event import HintBlockEvent, ReplyEndEvent, ReplyStartEvent
from trioagent.message import (
    Base64Source,
    DataBlock,
    HintBlock,
    Msg,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    ToolResultState,
)
from trioagent.middleware import MiddlewareBase, NextHandler, RAGMiddleware
from trioagent.middleware._rag import DEFAULT_HINT_TEMPLATE
from trioagent.model import ChatResponse
from trioagent.permission import PermissionBehavior, PermissionContext
from trioagent.rag import (
    Chunk,
    EmbeddingModelBase,
    EmbeddingResponse,
    InMemoryVectorStore,
    KnowledgeBase,
    VectorRecord,
    VectorSearchResult,
    format_results,
    wrap_hint,
)
from trioagent.testing import ScriptedModel, SweepRun, cancel_sweep
from trioagent.tool import Toolkit
from trioagent.types import ReplyFinishedReason

SOURCE = '{"label": "KnowledgeBase", "sublabel": ""}'
PARIS_HINT = (
    "<system-reminder>The following content is retrieved from the knowledge base(s) and may be "
    "helpful for the current request:\n<content>[1] (source: doc-1.txt)\nParis is in France."
    "</content></system-reminder>"
)
PARIS_ENTRY = "[1] (source: doc-1.txt)\nParis is in France."
KEY = "RAGMiddleware"


# -- fakes ------------------------------------------------------------------------------------


class StubEmbedding(EmbeddingModelBase):
    """Fixed vectors: ``table[text]`` or [1, 0, 0] (AgentScope's test stub); records every call's
    inputs as given (TextBlocks not yet unwrapped).  ``block`` makes calls wait forever."""

    def __init__(
        self,
        table: dict[str, list[float]] | None = None,
        *,
        multimodal: bool = False,
        error: Exception | None = None,
    ) -> None:
        super().__init__("stub", dimensions=3, max_retries=0)
        self.table = table or {}
        self.multimodal = multimodal
        self.error = error
        self.calls: list[list[Any]] = []
        self.block = False
        self.entered = trio.Event()
        self.barrier: int | None = None
        self._arrived = 0
        self._all_in = trio.Event()

    @property
    def supports_multimodal(self) -> bool:  # type: ignore[override]
        return self.multimodal

    async def __call__(self, inputs: Any, **kwargs: Any) -> EmbeddingResponse:
        self.calls.append(list(inputs))
        return await super().__call__(inputs, **kwargs)

    async def _call_api(self, batch: list[Any], **kwargs: Any) -> EmbeddingResponse:
        self.entered.set()
        if self.barrier is not None:
            self._arrived += 1
            if self._arrived >= self.barrier:
                self._all_in.set()
            await self._all_in.wait()
        if self.block:
            await trio.sleep_forever()
        await trio.lowlevel.checkpoint()
        if self.error is not None:
            raise self.error
        vectors = [
            list(self.table.get(item, [1.0, 0.0, 0.0])) if isinstance(item, str) else [1.0, 0, 0]
            for item in batch
        ]
        return EmbeddingResponse(embeddings=vectors)


async def paris_kb(
    model: EmbeddingModelBase | None = None, *, extra: bool = False, name: str = "paris-kb"
) -> KnowledgeBase:
    """AgentScope's test fixture: "Paris is in France." [1,0,0] doc-1, "Cats are mammals."
    [0,1,0] doc-2 (and with ``extra`` "Lyon is in France." [0.8,0.6,0] doc-3)."""
    store = InMemoryVectorStore()
    kb = KnowledgeBase(name, "Facts about Paris.", model or StubEmbedding(), store)
    await kb.ensure_collection()
    rows = [
        ("doc-1", "Paris is in France.", [1.0, 0.0, 0.0]),
        ("doc-2", "Cats are mammals.", [0.0, 1.0, 0.0]),
    ]
    if extra:
        rows.append(("doc-3", "Lyon is in France.", [0.8, 0.6, 0.0]))
    await store.insert(
        kb.collection,
        [
            VectorRecord(
                vector=vector,
                document_id=doc,
                chunk=Chunk(content=text, source=f"{doc}.txt"),
            )
            for doc, text, vector in rows
        ],
    )
    return kb


def embedding_of(kb: KnowledgeBase) -> StubEmbedding:
    model = kb.embedding_model
    assert isinstance(model, StubEmbedding)
    return model


class FakeState:
    """AgentScope's test fake: ``append_context`` always appends a new carrier message
    with id ``reply-1``."""

    def __init__(self) -> None:
        self.context: list[Msg] = []
        self.cur_iter = 0
        self.reply_id = "reply-1"
        self.middle_context: dict[str, Any] = {}

    def append_context(self, name: str, blocks: list[Any]) -> Msg:
        msg = Msg(name, list(blocks), "assistant", id="reply-1")
        self.context.append(msg)
        return msg


class FakeAgent:
    name = "assistant"

    def __init__(self) -> None:
        self.state = FakeState()


async def drive(mw: RAGMiddleware, agent: FakeAgent, inputs: Any) -> tuple[list[Any], list[Any]]:
    """``on_reply`` around a reply that starts and reasons once.  Returns the items of the
    reasoning step and the context its core saw."""
    items: list[Any] = []
    during: list[list[Msg]] = []

    async def reasoning_core(kwargs: dict[str, Any], emit: Any) -> None:
        during.append(copy.deepcopy(agent.state.context))
        await emit("reasoning-evt")

    async def collect(item: Any) -> None:
        items.append(item)

    async def reply_core(kwargs: dict[str, Any], emit: Any) -> None:
        await emit(ReplyStartEvent(session_id="s-1", reply_id="reply-1", name=agent.name))
        reasoning_kwargs: dict[str, Any] = {"tool_choice": None}
        await mw.on_reasoning(
            agent, reasoning_kwargs, NextHandler(reasoning_core, reasoning_kwargs, collect), collect
        )

    async def outer(item: Any) -> None:
        return None

    reply_kwargs = {"inputs": inputs, "structured_schema": None}
    await mw.on_reply(agent, reply_kwargs, NextHandler(reply_core, reply_kwargs, outer), outer)
    return items, during[0]


def static(**kwargs: Any) -> RAGMiddleware.Parameters:
    return RAGMiddleware.Parameters(mode="static", **kwargs)


def paris_question() -> Msg:
    return UserMsg("user", "Where is Paris?")


async def no_emit(chunk: Any) -> None:
    return None


# -- AgentScope's scenarios: static mode ----------------------------------------------------


async def test_static_top_k_1_without_event_injects_for_one_step() -> None:
    mw = RAGMiddleware([await paris_kb()], static(top_k=1, emit_hint_event=False))
    agent = FakeAgent()
    items, during = await drive(mw, agent, paris_question())
    assert items == ["reasoning-evt"]
    [carrier] = during
    assert carrier.id == "reply-1"
    assert carrier.role == "assistant"
    [hint] = carrier.content
    assert isinstance(hint, HintBlock)
    assert hint.type == "hint"
    assert hint.source == SOURCE
    assert hint.hint == PARIS_HINT
    [after] = agent.state.context
    assert after.id == "reply-1"
    assert after.content == []  # the carrier stays, the hint is gone
    assert KEY not in agent.state.middle_context  # the reply's query blocks are dropped


async def test_persist_hint_keeps_the_context_seen_during_reasoning() -> None:
    mw = RAGMiddleware([await paris_kb()], static(top_k=1, persist_hint=True))
    agent = FakeAgent()
    _, during = await drive(mw, agent, paris_question())
    assert agent.state.context == during
    assert agent.state.context[0].content[0].hint == PARIS_HINT  # type: ignore[union-attr]


async def test_emit_hint_event_comes_before_the_reasoning_items() -> None:
    mw = RAGMiddleware([await paris_kb()], static(top_k=1, emit_hint_event=True))
    agent = FakeAgent()
    items, during = await drive(mw, agent, paris_question())
    assert len(items) == 2
    event, rest = items
    assert isinstance(event, HintBlockEvent)
    assert event.type == "HINT_BLOCK"
    assert event.reply_id == "reply-1"
    assert event.source == SOURCE
    assert event.hint == PARIS_HINT
    assert event.block_id == during[0].content[0].id
    assert rest == "reasoning-evt"


async def test_no_inputs_means_no_embedding_call_and_an_untouched_context() -> None:
    kb = await paris_kb()
    mw = RAGMiddleware([kb], static())
    agent = FakeAgent()
    items, during = await drive(mw, agent, None)
    assert items == ["reasoning-evt"]
    assert embedding_of(kb).calls == []
    assert during == []
    assert agent.state.context == []


async def test_multimodal_model_gets_the_labelled_text_and_the_data_block() -> None:
    picture = DataBlock(source=Base64Source(data="aGk=", media_type="image/png"))
    question = UserMsg("user", [TextBlock(text="  "), TextBlock(text="What is this?"), picture])
    kb = await paris_kb(StubEmbedding(multimodal=True))
    await drive(RAGMiddleware([kb], static()), FakeAgent(), question)
    [call] = embedding_of(kb).calls
    assert [type(b).__name__ for b in call] == ["TextBlock", "DataBlock"]
    assert call[0].text == "user: What is this?"
    assert call[1].source == picture.source
    assert question.content[1].text == "What is this?"  # the input message is not touched

    text_only = await paris_kb()
    await drive(RAGMiddleware([text_only], static()), FakeAgent(), question)
    [call] = embedding_of(text_only).calls
    assert [b.text for b in call] == ["user: What is this?"]  # the DataBlock was dropped


async def test_a_list_of_messages_labels_each_one() -> None:
    kb = await paris_kb()
    inputs = [UserMsg("alice", "Hi"), UserMsg("bob", [TextBlock(text="a"), TextBlock(text="b")])]
    await drive(RAGMiddleware([kb], static()), FakeAgent(), inputs)
    [call] = embedding_of(kb).calls
    assert [b.text for b in call] == ["alice: Hi", "bob: a", "b"]


# -- AgentScope's scenarios: agentic mode ----------------------------------------------------


async def test_list_tools_by_mode() -> None:
    kb = await paris_kb()
    agentic = RAGMiddleware([kb])
    tools = await agentic.list_tools()
    assert [t.name for t in tools] == ["search_knowledge"]
    assert (await agentic.list_tools())[0] is not tools[0]  # a fresh tool every time
    assert await RAGMiddleware([kb], static()).list_tools() == []


async def test_agentic_mode_never_searches_nor_injects() -> None:
    kb = await paris_kb()
    agent = FakeAgent()
    items, during = await drive(RAGMiddleware([kb]), agent, paris_question())
    assert items == ["reasoning-evt"]
    assert embedding_of(kb).calls == []
    assert during == []
    assert agent.state.context == []


async def test_search_tool_returns_the_cited_chunk() -> None:
    kb = await paris_kb()
    [tool] = await RAGMiddleware([kb], RAGMiddleware.Parameters(top_k=1)).list_tools()
    chunk = await tool.call(no_emit, query="Where is Paris?")
    assert [b.text for b in chunk.content] == [PARIS_ENTRY]
    assert chunk.state == ToolResultState.SUCCESS
    assert chunk.is_last is True
    assert chunk.metadata == {}
    response = await tool(query="Where is Paris?")
    assert response.text() == PARIS_ENTRY
    assert embedding_of(kb).calls == [["Where is Paris?"], ["Where is Paris?"]]


async def test_search_tool_schema_narrows_names_and_describes_the_bases() -> None:
    [tool] = await RAGMiddleware([await paris_kb()]).list_tools()
    schema = tool.input_schema
    assert schema["required"] == ["query"]
    assert schema["properties"]["query"]["type"] == "string"
    array, null = schema["properties"]["knowledge_bases"]["anyOf"]
    assert array["items"]["enum"] == ["paris-kb"]
    assert null == {"type": "null"}
    assert schema["properties"]["knowledge_bases"]["default"] is None
    tool.validate_schema()
    assert "## When to Use" in tool.description
    assert "## Guidance" in tool.description
    assert tool.description.endswith(
        "## Equipped Knowledge Bases\nThe agent is currently equipped with 1 knowledge "
        "base(s):\n- **paris-kb**: Facts about Paris."
    )
    assert tool.is_read_only
    assert tool.is_concurrency_safe
    assert tool.middlewares == []
    decision = await tool.check_permissions({"query": "x"}, PermissionContext())
    assert decision.behavior == PermissionBehavior.ALLOW
    assert decision.message == "Knowledge-base search is read-only."

    [bare] = await RAGMiddleware([]).list_tools()
    assert "**Do not call this tool**" in bare.description
    assert "enum" not in bare.input_schema["properties"]["knowledge_bases"]["anyOf"][0]["items"]
    assert (await bare.call(no_emit, query="x")).content[0].text == "No relevant content found."


async def test_unknown_knowledge_base_name_finds_nothing_without_embedding() -> None:
    kb = await paris_kb()
    [tool] = await RAGMiddleware([kb]).list_tools()
    chunk = await tool.call(no_emit, query="Where is Paris?", knowledge_bases=["elsewhere"])
    assert [b.text for b in chunk.content] == ["No relevant content found."]
    assert chunk.state == ToolResultState.SUCCESS
    assert embedding_of(kb).calls == []


async def test_search_tool_selects_bases_by_name_and_reports_failures() -> None:
    paris = await paris_kb()
    broken = await paris_kb(StubEmbedding(error=RuntimeError("index offline")), name="broken")
    [tool] = await RAGMiddleware([paris, broken], RAGMiddleware.Parameters(top_k=1)).list_tools()
    chunk = await tool.call(no_emit, query="q", knowledge_bases=["paris-kb"])
    assert chunk.content[0].text == PARIS_ENTRY
    assert embedding_of(broken).calls == []
    failed = await tool.call(no_emit, query="q")
    assert failed.state == ToolResultState.ERROR
    assert [b.text for b in failed.content] == ["Search failed: index offline"]
    threshold = RAGMiddleware([paris], RAGMiddleware.Parameters(score_threshold=1.5))
    [strict] = await threshold.list_tools()
    assert (await strict.call(no_emit, query="q")).content[0].text == "No relevant content found."
    bad = await tool.call(no_emit)
    assert bad.state == ToolResultState.ERROR


async def test_the_middleware_never_touches_a_toolkit() -> None:
    toolkit = Toolkit()
    before = toolkit.get_tool_schemas()
    mw = RAGMiddleware([await paris_kb()])
    agent = Agent("assistant", model=ScriptedModel([]), toolkit=toolkit, middlewares=[mw])
    await mw.list_tools()
    assert agent.toolkit.get_tool_schemas() == before == []


# -- parameters -------------------------------------------------------------------------------


def test_hint_template_needs_exactly_one_placeholder() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        RAGMiddleware.Parameters(hint_template="no placeholder")
    with pytest.raises(ValueError, match="exactly one"):
        RAGMiddleware.Parameters(hint_template="{context} and {context}")
    with pytest.raises(ValueError, match="unknown placeholder"):
        RAGMiddleware.Parameters(hint_template="{context} {other}")
    assert RAGMiddleware.Parameters(hint_template="<kb>{context}</kb>").hint_template == (
        "<kb>{context}</kb>"
    )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"mode": "dynamic"}, "mode"),
        ({"top_k": 0}, "top_k"),
        ({"top_k": 51}, "top_k"),
        ({"top_k": True}, "top_k"),
        ({"rerank_candidate_k": 0}, "rerank_candidate_k"),
        ({"rerank_candidate_k": 51}, "rerank_candidate_k"),
        ({"top_k": 10, "rerank_candidate_k": 5}, r"rerank_candidate_k \(5\) must be >= top_k"),
        ({"score_threshold": "high"}, "score_threshold"),
        ({"emit_hint_event": 1}, "emit_hint_event"),
        ({"rerank_prompt": "rank {top_k}"}, "query"),
        ({"rerank_prompt": "{query} {lang}"}, "unknown placeholder"),
    ],
)
def test_parameters_are_validated(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RAGMiddleware.Parameters(**kwargs)


def test_parameters_are_frozen_with_agentscope_defaults() -> None:
    params = RAGMiddleware.Parameters(score_threshold=1)
    assert params.score_threshold == 1.0
    assert (params.mode, params.top_k, params.rerank_candidate_k) == ("agentic", 5, None)
    assert (params.emit_hint_event, params.persist_hint) == (True, False)
    assert params.hint_template == DEFAULT_HINT_TEMPLATE
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        params.top_k = 3  # type: ignore[misc]
    schema = RAGMiddleware.Parameters.json_schema()
    assert "hint_template" not in schema["properties"]
    assert "rerank_prompt" not in schema["properties"]
    assert RAGMiddleware([], {"mode": "static"}).parameters.mode == "static"
    with pytest.raises(TypeError):
        RAGMiddleware([], parameters=42)  # type: ignore[arg-type]


# -- formatting, wrapping and rerank ------------------------------------------------------------


def hit(doc: str, content: Any, score: float = 1.0) -> VectorSearchResult:
    return VectorSearchResult(
        score=score, document_id=doc, chunk=Chunk(content=content, source=f"{doc}.txt")
    )


def test_format_and_wrap_with_data_blocks() -> None:
    picture = DataBlock(source=Base64Source(data="aGk=", media_type="image/png"))
    blocks = format_results([hit("a", "alpha"), hit("b", picture), hit("c", "gamma")])
    assert [type(b).__name__ for b in blocks] == ["TextBlock", "DataBlock", "TextBlock"]
    assert blocks[0].text == "[1] (source: a.txt)\nalpha\n\n[2] (source: b.txt)\n"  # type: ignore[union-attr]
    assert blocks[2].text == "\n\n[3] (source: c.txt)\ngamma"  # type: ignore[union-attr]
    wrapped = wrap_hint("<kb>{context}</kb>", blocks)
    assert isinstance(wrapped, list)
    assert wrapped[0].text.startswith("<kb>[1]")  # type: ignore[union-attr]
    assert wrapped[-1].text.endswith("gamma</kb>")  # type: ignore[union-attr]
    only_data = wrap_hint("<kb>{context}</kb>", [picture])
    assert isinstance(only_data, list)
    assert [getattr(b, "text", "data") for b in only_data] == ["<kb>", "data", "</kb>"]
    assert wrap_hint("[{context}]", format_results([hit("a", "x")])) == "[[1] (source: a.txt)\nx]"
    assert format_results([]) == []


def structured(ids: Any) -> ChatResponse:
    payload = json.dumps({"ids": ids})
    return ChatResponse(
        content=[ToolCallBlock(id="rr-1", name="generate_structured_output", input=payload)]
    )


async def test_rerank_orders_by_the_model_and_fills_in_vector_order() -> None:
    reranker = ScriptedModel([structured(["c3", "c3", "bogus"])])
    kb = await paris_kb(extra=True)
    mw = RAGMiddleware([kb], RAGMiddleware.Parameters(top_k=2), rerank_model=reranker)
    results = await mw.search(["Where is Paris?"])
    assert [r.document_id for r in results] == ["doc-2", "doc-1"]
    [request] = reranker.requests
    [msg] = request.messages
    texts = [b.text for b in msg.content if isinstance(b, TextBlock)]
    assert "return the ids of the 2 most relevant one(s)" in texts[0]
    assert texts[0].endswith("<user-query>\nWhere is Paris?\n</user-query>")
    assert texts[1:4] == [
        '<candidate id="c1" source="doc-1.txt">\nParis is in France.\n</candidate>',
        '<candidate id="c2" source="doc-3.txt">\nLyon is in France.\n</candidate>',
        '<candidate id="c3" source="doc-2.txt">\nCats are mammals.\n</candidate>',
    ]
    assert request.tools is not None
    assert request.tools[0]["function"]["parameters"]["required"] == ["ids"]


async def test_rerank_failure_keeps_the_vector_order() -> None:
    reranker = ScriptedModel([RuntimeError("reranker down")])
    kb = await paris_kb(extra=True)
    mw = RAGMiddleware([kb], RAGMiddleware.Parameters(top_k=2), rerank_model=reranker)
    results = await mw.search(["q"])
    assert [r.document_id for r in results] == ["doc-1", "doc-3"]


async def test_rerank_widens_the_candidates() -> None:
    asked: list[int] = []

    class Recording(KnowledgeBase):
        async def search(self, queries: Any, top_k: int = 5, score_threshold: Any = None) -> Any:
            asked.append(top_k)
            return await super().search(queries, top_k, score_threshold)

    base = await paris_kb(extra=True)
    kb = Recording("rec", "d", base.embedding_model, base.store, collection=base.collection)
    for params, expected in [
        (RAGMiddleware.Parameters(top_k=1), 2),
        (RAGMiddleware.Parameters(top_k=30), 50),
        (RAGMiddleware.Parameters(top_k=1, rerank_candidate_k=3), 3),
    ]:
        asked.clear()
        reranker = ScriptedModel([structured([])])
        await RAGMiddleware([kb], params, rerank_model=reranker).search(["q"])
        assert asked == [expected]
    asked.clear()
    await RAGMiddleware([kb], RAGMiddleware.Parameters(top_k=1, rerank_candidate_k=3)).search(["q"])
    assert asked == [1]  # without a rerank model the candidate count is ignored


async def test_search_merges_knowledge_bases_by_score() -> None:
    paris = await paris_kb()
    cats = await paris_kb(StubEmbedding({"user: Where is Paris?": [0.1, 1.0, 0.0]}), name="cats")
    mw = RAGMiddleware([paris, cats], RAGMiddleware.Parameters(top_k=2))
    results = await mw.search([TextBlock(text="user: Where is Paris?")])
    assert [(r.document_id, r.chunk.text) for r in results] == [
        ("doc-1", "Paris is in France."),  # 1.0 in paris-kb
        ("doc-2", "Cats are mammals."),  # 0.995 in cats
    ]


# -- through a real agent -----------------------------------------------------------------------


def reply_text(value: str) -> ChatResponse:
    return ChatResponse(content=[TextBlock(text=value)])


def rag_agent(mw: RAGMiddleware, steps: list[Any], **kwargs: Any) -> Agent:
    kwargs.setdefault("injection_config", NO_INJECTION)
    return Agent("assistant", "Be brief.", ScriptedModel(steps), middlewares=[mw], **kwargs)


def kb_hints(context: list[Msg]) -> list[HintBlock]:
    return [
        b for m in context for b in m.content if isinstance(b, HintBlock) and b.source == SOURCE
    ]


async def test_static_reply_injects_once_and_removes_the_hint() -> None:
    kb = await paris_kb()
    seen: list[list[Msg]] = []

    def first(request: Any) -> ChatResponse:
        seen.append(request.messages)
        return ChatResponse(
            content=[ToolCallBlock(id="call-1", name="lookup", input=json.dumps({"city": "x"}))]
        )

    def second(request: Any) -> ChatResponse:
        seen.append(request.messages)
        return reply_text("Paris is in France.")

    def lookup(city: str) -> str:
        """Look a city up."""
        return "found"

    toolkit = Toolkit()
    toolkit.register_function(lookup, permission=ALLOW)
    mw = RAGMiddleware([kb], static(top_k=1))
    agent = rag_agent(mw, [first, second], toolkit=toolkit)
    recorder = Recorder()
    msg = await agent.reply(paris_question(), on_event=recorder)
    assert msg.finished_reason == ReplyFinishedReason.COMPLETED
    # The first model call saw the hint in this reply's assistant message, the second did not.
    assert [h.hint for h in kb_hints(seen[0])] == [PARIS_HINT]
    carrier = seen[0][-1]
    assert carrier.role == "assistant"
    assert carrier.id == agent.state.reply_id
    assert kb_hints(seen[1]) == []
    assert kb_hints(agent.state.context) == []
    assert len(embedding_of(kb).calls) == 1  # tool rounds do not search again
    types = recorder.types
    assert types.index("HINT_BLOCK") < types.index("MODEL_CALL_START")
    assert types.count("HINT_BLOCK") == 1
    assert KEY not in agent.state.middle_context


async def test_one_instance_serves_two_agents_concurrently() -> None:
    model = StubEmbedding({"user: Paris": [1.0, 0.0, 0.0], "user: cats": [0.0, 1.0, 0.0]})
    kb = await paris_kb(model)
    mw = RAGMiddleware([kb], static(top_k=1))
    arrived = 0
    both_replying = trio.Event()

    class Barrier(MiddlewareBase):
        """Outermost on_reasoning: waits until both replies have started, so each search
        runs while the other reply's on_reply is active."""

        async def on_reasoning(self, agent: Any, kwargs: Any, next_handler: Any, emit: Any) -> None:
            nonlocal arrived
            arrived += 1
            if arrived == 2:
                both_replying.set()
            await both_replying.wait()
            await next_handler()

    hints: dict[str, list[Any]] = {}

    def answer(name: str) -> Any:
        def step(request: Any) -> ChatResponse:
            hints[name] = [h.hint for h in kb_hints(request.messages)]
            return reply_text("ok")

        return step

    def agent(name: str) -> Agent:
        return Agent(
            name,
            model=ScriptedModel([answer(name)]),
            middlewares=[Barrier(), mw],
            injection_config=NO_INJECTION,
        )

    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(agent("a").reply, UserMsg("user", "Paris"))
            nursery.start_soon(agent("b").reply, UserMsg("user", "cats"))
    assert "Paris is in France." in hints["a"][0]
    assert "Cats are mammals." in hints["b"][0]


async def test_a_failing_static_search_lets_the_reply_go_on() -> None:
    kb = await paris_kb(StubEmbedding(error=RuntimeError("index offline")))
    seen: list[list[Msg]] = []

    def step(request: Any) -> ChatResponse:
        seen.append(request.messages)
        return reply_text("I do not know.")

    msg = await rag_agent(RAGMiddleware([kb], static()), [step]).reply(paris_question())
    assert msg.finished_reason == ReplyFinishedReason.COMPLETED
    assert kb_hints(seen[0]) == []


async def test_agentic_reply_calls_search_knowledge_through_the_loop() -> None:
    kb = await paris_kb()
    mw = RAGMiddleware([kb], RAGMiddleware.Parameters(top_k=1))
    call = ToolCallBlock(
        id="call-1", name="search_knowledge", input=json.dumps({"query": "Where is Paris?"})
    )
    seen: list[list[Msg]] = []

    def answer(request: Any) -> ChatResponse:
        seen.append(request.messages)
        return reply_text("Paris is in France.")

    agent = rag_agent(
        mw, [ChatResponse(content=[call]), answer], toolkit=Toolkit(tools=await mw.list_tools())
    )
    msg = await agent.reply(paris_question())
    assert msg.get_text_content() == "Paris is in France."
    results = [b for m in seen[0] for b in m.content if isinstance(b, ToolResultBlock)]
    [result] = results
    assert result.name == "search_knowledge"
    assert result.state == ToolResultState.SUCCESS
    assert [b.text for b in result.output if isinstance(b, TextBlock)] == [PARIS_ENTRY]
    assert embedding_of(kb).calls == [["Where is Paris?"]]
    assert kb_hints(agent.state.context) == []  # agentic mode injects nothing
    assert agent.model.requests[0].tools[0]["function"]["name"] == "search_knowledge"  # type: ignore[attr-defined]


# -- cancellation -------------------------------------------------------------------------------


def assert_one_interrupted_end(events: list[Any]) -> None:
    ends = [e for e in events if isinstance(e, ReplyEndEvent)]
    assert len(ends) == 1
    assert ends[0] is events[-1]
    assert ends[0].finished_reason == ReplyFinishedReason.INTERRUPTED


async def test_interrupt_during_the_static_search() -> None:
    kb = await paris_kb()
    embedding_of(kb).block = True
    agent = rag_agent(RAGMiddleware([kb], static()), [])  # the model is never called
    recorder = Recorder()
    result: list[Msg] = []

    async def run() -> None:
        result.append(await agent.reply(paris_question(), on_event=recorder))

    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run)
            await embedding_of(kb).entered.wait()
            agent.interrupt()
    assert result[0].finished_reason == ReplyFinishedReason.INTERRUPTED
    assert_one_interrupted_end(recorder.events)
    assert "HINT_BLOCK" not in recorder.types
    assert kb_hints(agent.state.context) == []
    assert KEY not in agent.state.middle_context


async def test_outer_cancellation_during_the_static_search_propagates() -> None:
    kb = await paris_kb()
    embedding_of(kb).block = True
    agent = rag_agent(RAGMiddleware([kb], static()), [])
    recorder = Recorder()
    scope = trio.CancelScope()

    async def run() -> None:
        with scope:
            await agent.reply(paris_question(), on_event=recorder)
            pytest.fail("the outer cancellation was swallowed")  # pragma: no cover

    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run)
            await embedding_of(kb).entered.wait()
            scope.cancel()
    assert scope.cancelled_caught
    assert_one_interrupted_end(recorder.events)
    assert kb_hints(agent.state.context) == []


async def test_interrupt_during_the_model_call_removes_the_injected_hint() -> None:
    kb = await paris_kb()
    calling = trio.Event()
    seen: list[list[Msg]] = []

    async def stuck(request: Any) -> ChatResponse:
        seen.append(request.messages)
        calling.set()
        await trio.sleep_forever()
        raise AssertionError  # pragma: no cover

    agent = rag_agent(RAGMiddleware([kb], static(top_k=1)), [stuck])
    recorder = Recorder()
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(partial_reply, agent, recorder)
            await calling.wait()
            agent.interrupt()
    assert [h.hint for h in kb_hints(seen[0])] == [PARIS_HINT]  # it was there for the call
    assert_one_interrupted_end(recorder.events)
    assert recorder.types.count("HINT_BLOCK") == 1
    assert kb_hints(agent.state.context) == []


async def partial_reply(agent: Agent, recorder: Recorder) -> None:
    await agent.reply(paris_question(), on_event=recorder)


@pytest.mark.parametrize("mode", ["interrupt", "outer"])
async def test_cancel_sweep_over_a_static_reply(
    autojump_clock: trio.testing.MockClock, mode: str
) -> None:
    kb = await paris_kb()

    def make_agent() -> Agent:
        return rag_agent(RAGMiddleware([kb], static(top_k=1)), [reply_text("In France.")])

    def check(run: SweepRun) -> None:
        assert kb_hints(run.agent.state.context) == []
        assert KEY not in run.agent.state.middle_context
        if run.end is not None and run.end.finished_reason == ReplyFinishedReason.COMPLETED:
            assert run.msg is not None
            assert run.msg.get_text_content() == "In France."

    report = await cancel_sweep(make_agent, paris_question, mode=mode, check=check)
    kinds = [
        ([str(e.type) for e in run.events], run.end.finished_reason if run.end else None)
        for run in report.runs
    ]
    # The sweep cancelled during the search (no hint yet), after the hint was injected, and
    # also ran to completion.
    assert (["REPLY_START", "REPLY_END"], "interrupted") in kinds
    assert any("HINT_BLOCK" in types and end == "interrupted" for types, end in kinds)
    assert any(end == "completed" for _, end in kinds)


# -- the middleware -----------------------------------------------------------------------------


class Table(EmbeddingModelBase):
    """Table lookup (default [1, 0, 0]), or an error for some texts."""

    def __init__(self, table: dict[str, list[float]] | None = None, **kwargs: Any) -> None:
        kwargs.setdefault("max_retries", 0)
        super().__init__("table", dimensions=3, **kwargs)
        self.table = table or {}
        self.fail: Exception | None = None

    async def _call_api(self, batch: list[Any], **kwargs: Any) -> EmbeddingResponse:
        await trio.lowlevel.checkpoint()
        if self.fail is not None:
            raise self.fail
        return EmbeddingResponse(
            embeddings=[list(self.table.get(t, [1.0, 0.0, 0.0])) for t in batch]
        )


async def kb_with(name: str, rows: list[tuple[str, str, list[float]]], **kwargs: Any):
    store = InMemoryVectorStore()
    kb = KnowledgeBase(name, f"{name} facts", Table(**kwargs), store)
    await kb.ensure_collection()
    await store.insert(
        kb.collection,
        [
            VectorRecord(vector=v, document_id=d, chunk=Chunk(content=t, source=f"{d}.md"))
            for d, t, v in rows
        ],
    )
    return kb


def hints(context: list[Msg]) -> list[HintBlock]:
    return [
        b for m in context for b in m.content if isinstance(b, HintBlock) and b.source == SOURCE
    ]


def agent_with(mw: RAGMiddleware, steps: list[Any]) -> Agent:
    return Agent(
        "assistant",
        "Be brief.",
        ScriptedModel(steps),
        middlewares=[mw],
        injection_config=NO_INJECTION,
    )


async def test_one_failing_knowledge_base_drops_the_hint_logs_and_completes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    good = await kb_with("good", [("d1", "Paris is in France.", [1.0, 0.0, 0.0])])
    bad = await kb_with("bad", [("d2", "x", [1.0, 0.0, 0.0])])
    assert isinstance(bad.embedding_model, Table)
    bad.embedding_model.fail = RuntimeError("index offline")
    seen: list[list[Msg]] = []

    def step(request: Any) -> ChatResponse:
        seen.append(request.messages)
        return ChatResponse(content=[TextBlock(text="ok")])

    mw = RAGMiddleware([good, bad], {"mode": "static"})
    agent = agent_with(mw, [step])
    with caplog.at_level(logging.WARNING, logger="trioagent.middleware"):
        msg = await agent.reply(UserMsg("user", "Where is Paris?"))
    assert msg.finished_reason == ReplyFinishedReason.COMPLETED
    assert msg.get_text_content() == "ok"
    assert hints(seen[0]) == []  # a failing base fails the whole search (as documented)
    [warning] = [r for r in caplog.records if "knowledge-base search failed" in r.getMessage()]
    assert warning.levelno == logging.WARNING
    assert "index offline" in warning.getMessage()


async def test_static_hint_merges_bases_by_score_applies_the_threshold_and_sits_last() -> None:
    first = await kb_with(
        "first",
        [("f1", "Lyon is in France.", [0.8, 0.6, 0.0]), ("f2", "Unrelated.", [0.0, 0.0, 1.0])],
    )
    second = await kb_with("second", [("s1", "Paris is in France.", [1.0, 0.0, 0.0])])
    seen: list[list[Msg]] = []

    def step(request: Any) -> ChatResponse:
        seen.append(request.messages)
        return ChatResponse(content=[TextBlock(text="ok")])

    mw = RAGMiddleware([first, second], {"mode": "static", "top_k": 5, "score_threshold": 0.5})
    agent = agent_with(mw, [step])
    await agent.reply(UserMsg("user", "Where is Paris?"))
    [hint] = hints(seen[0])
    assert hint.hint == (
        "<system-reminder>The following content is retrieved from the knowledge base(s) and "
        "may be helpful for the current request:\n<content>"
        "[1] (source: s1.md)\nParis is in France.\n\n[2] (source: f1.md)\nLyon is in France."
        "</content></system-reminder>"
    )
    carrier = seen[0][-1]
    assert carrier.role == "assistant"
    assert carrier.content[-1].id == hint.id  # the hint is the carrier's last block
    assert seen[0][-2].get_text_content() == "Where is Paris?"  # after the user's input
    assert hints(agent.state.context) == []


async def test_static_search_with_no_hits_injects_nothing() -> None:
    kb = await kb_with("kb", [("d1", "far", [-1.0, 0.0, 0.0])])
    seen: list[list[Msg]] = []

    def step(request: Any) -> ChatResponse:
        seen.append(request.messages)
        return ChatResponse(content=[TextBlock(text="ok")])

    mw = RAGMiddleware([kb], {"mode": "static", "score_threshold": 0.0})
    await agent_with(mw, [step]).reply(UserMsg("user", "anything"))
    assert hints(seen[0]) == []


@pytest.mark.parametrize("mode", ["interrupt", "outer"])
async def test_cancel_sweep_over_a_multi_batch_static_search(
    autojump_clock: trio.testing.MockClock, mode: str
) -> None:
    first = await kb_with("first", [("f1", "Paris is in France.", [1.0, 0.0, 0.0])], batch_size=1)
    second = await kb_with("second", [("s1", "Cats.", [0.0, 1.0, 0.0])], batch_size=1)

    def make_agent() -> Agent:
        mw = RAGMiddleware([first, second], {"mode": "static", "top_k": 1})
        return agent_with(mw, [ChatResponse(content=[TextBlock(text="In France.")])])

    def inputs() -> list[Msg]:
        return [UserMsg("user", "Where is Paris?"), UserMsg("bob", "And cats?")]

    def check(run: SweepRun) -> None:
        assert hints(run.agent.state.context) == []
        assert "RAGMiddleware" not in run.agent.state.middle_context

    report = await cancel_sweep(make_agent, inputs, mode=mode, check=check)
    ends = [run.end.finished_reason if run.end else None for run in report.runs]
    assert ReplyFinishedReason.INTERRUPTED in ends
    assert ReplyFinishedReason.COMPLETED in ends
