"""Edge cases of trioagent.rag and RAGMiddleware: chunking boundaries (empty, exact budget,
multi-byte characters, overlap limits), the in-memory store (k bounds, ties, dimension
mismatches, zero vectors, delete/re-insert), the OpenAI embedding model over loopback (HTTP
errors, short or shuffled answers, a cancelled multi-batch call, cache keys) and the middleware
(failing retrieval, merged hints, a cancel sweep over a multi-batch static search)."""

from __future__ import annotations

import itertools
import logging
import math
import random
from functools import partial
from typing import Any

import pytest
import trio
import trio.testing
from agent_helpers import NO_INJECTION

from trioagent import UserMsg
from trioagent.agent import Agent
from trioagent.credential import OpenAICredential
from trioagent.exception import ModelUpstreamError
from trioagent.message import HintBlock, Msg, TextBlock
from trioagent.middleware import RAGMiddleware
from trioagent.model import ChatResponse
from trioagent.rag import (
    Chunk,
    Document,
    EmbeddingModelBase,
    EmbeddingResponse,
    EmbeddingUsage,
    InMemoryEmbeddingCache,
    InMemoryVectorStore,
    KnowledgeBase,
    OpenAIEmbeddingModel,
    VectorRecord,
    chunk_document,
    cosine_similarity,
    split_text,
)
from trioagent.testing import (
    OpenAICompatibleServer,
    ScriptedModel,
    ScriptedResponse,
    SweepRun,
    cancel_sweep,
    serve_openai_compatible,
)
from trioagent.types import ReplyFinishedReason

KEY = "sk-embed-edges-5678"
SOURCE = '{"label": "KnowledgeBase", "sublabel": ""}'


# -- chunking -----------------------------------------------------------------------------------


def spans(text: str, pieces: list[str]) -> list[tuple[int, int]]:
    """Where each piece sits in ``text`` (unambiguous: the texts below never repeat a char)."""
    assert len(set(text)) == len(text)
    return [(text.index(p), text.index(p) + len(p)) for p in pieces]


def test_split_empty_text_gives_one_empty_piece_and_no_chunk() -> None:
    assert split_text("", chunk_size=1, overlap=0) == [""]
    assert chunk_document(Document(content="")) == []
    assert chunk_document(Document(content=" \n\t ")) == []


def test_split_text_at_the_budget_stays_whole_and_one_token_more_splits() -> None:
    fits = "abcd" * 8  # 32 bytes = 8 approximate tokens
    assert split_text(fits, chunk_size=8, overlap=2) == [fits]
    longer = fits + "wxyz"  # 9 tokens
    pieces = split_text(longer, chunk_size=8, overlap=2)
    assert len(pieces) == 2
    assert pieces[0] == longer[:32]
    assert pieces[1] == longer[24:]  # 8 bytes shared
    single = split_text("é", chunk_size=1, overlap=0)  # 2 bytes, 0 tokens: whole
    assert single == ["é"]


@pytest.mark.parametrize(("chunk_size", "overlap"), [(5, 5), (5, 6), (5, -1), (0, 0), (-3, 0)])
def test_split_text_rejects_bad_sizes(chunk_size: int, overlap: int) -> None:
    with pytest.raises(ValueError, match=r"chunk_size|overlap"):
        split_text("x" * 100, chunk_size=chunk_size, overlap=overlap)


def test_knowledge_base_rejects_overlap_not_below_chunk_size() -> None:
    with pytest.raises(ValueError, match="chunk_overlap"):
        KnowledgeBase("kb", "d", Fixed(), InMemoryVectorStore(), chunk_size=4, chunk_overlap=4)


def test_split_text_emoji_text_without_overlap_loses_and_repeats_nothing() -> None:
    text = "a😀b🎉中é" * 30
    for size in (1, 2, 3, 7):
        pieces = split_text(text, chunk_size=size, overlap=0)
        assert "".join(pieces) == text
        assert all(0 < len(p.encode()) <= size * 4 for p in pieces)


def test_split_text_with_overlap_covers_everything_and_shares_about_the_overlap() -> None:
    rng = random.Random(7)
    # Distinct characters of 1..4 UTF-8 bytes each, so every piece is located exactly.
    pool = (
        [chr(c) for c in range(0x21, 0x7F)]
        + [chr(c) for c in range(0xC0, 0x180)]
        + [chr(c) for c in range(0x4E00, 0x4F00)]
        + [chr(c) for c in range(0x1F600, 0x1F650)]
    )
    for _ in range(200):
        text = "".join(rng.sample(pool, rng.randint(0, 60)))
        size = rng.randint(2, 12)
        overlap = rng.randint(0, size - 2)  # chunk_size - overlap >= 2: see the report
        pieces = split_text(text, chunk_size=size, overlap=overlap)
        if len(text.encode()) // 4 <= size:
            assert pieces == [text]
            continue
        located = spans(text, pieces)
        assert located[0][0] == 0
        assert located[-1][1] == len(text)
        for (start1, end1), (start2, end2) in itertools.pairwise(located):
            assert start1 < start2 <= end1 < end2  # nothing lost, progress made
            shared = len(text[start2:end1].encode())
            assert shared <= overlap * 4 + 3  # at most the overlap, rounded up to a char
        assert all(len(p.encode()) <= size * 4 for p in pieces)


def test_chunk_document_keeps_source_metadata_and_numbering_per_document() -> None:
    doc = Document(content="x" * 50, metadata={"k": [1]}, id="doc-7")
    chunks = chunk_document(doc, chunk_size=4, overlap=1)
    assert [c.chunk_index for c in chunks] == list(range(len(chunks)))
    assert all(c.total_chunks == len(chunks) and c.source == "doc-7" for c in chunks)
    chunks[0].metadata["new"] = True
    assert "new" not in doc.metadata


# -- the in-memory store ------------------------------------------------------------------------


def record(doc: str, vector: list[float], index: int = 0, text: str = "t") -> VectorRecord:
    return VectorRecord(
        vector=vector,
        document_id=doc,
        chunk=Chunk(content=text, source=f"{doc}.txt", chunk_index=index),
    )


async def filled_store(*records: VectorRecord, dimensions: int = 2) -> InMemoryVectorStore:
    store = InMemoryVectorStore()
    await store.create_collection("c", dimensions)
    await store.insert("c", list(records))
    return store


async def test_store_search_k_bounds_and_empty_collections() -> None:
    store = await filled_store(record("a", [1.0, 0.0]), record("b", [0.6, 0.8]))
    hits = await store.search("c", [1.0, 0.0], top_k=50)
    assert [h.document_id for h in hits] == ["a", "b"]
    assert await store.search("c", [1.0, 0.0], top_k=0) == []
    assert await store.search("c", [1.0, 0.0], top_k=-2) == []
    empty = await filled_store()
    assert await empty.search("c", [1.0, 0.0], top_k=3) == []
    assert await empty.list_documents("c") == []
    assert await empty.list_chunks("c", "nope") == []


async def test_store_ties_keep_insertion_order() -> None:
    store = await filled_store(*(record(f"d{i}", [2.0, 2.0]) for i in range(6)))
    hits = await store.search("c", [1.0, 1.0], top_k=4)
    assert [h.document_id for h in hits] == ["d0", "d1", "d2", "d3"]
    assert len({h.score for h in hits}) == 1


async def test_store_dimension_mismatches_are_clear_errors() -> None:
    store = await filled_store(record("a", [1.0, 0.0]))
    with pytest.raises(ValueError, match="expected 2, got 3"):
        await store.search("c", [1.0, 0.0, 0.0])
    with pytest.raises(ValueError, match="expected 2, got 1"):
        await store.insert("c", [record("b", [1.0, 0.0]), record("x", [1.0])])
    assert [d.document_id for d in await store.list_documents("c")] == ["a"]  # all or none
    with pytest.raises(ValueError, match="positive"):
        await store.create_collection("d", 0)
    await store.create_collection("c", 5)  # exists: a no-op, the dimensions stay
    assert store.dimensions("c") == 2


async def test_knowledge_base_over_a_collection_of_another_size_fails_clearly() -> None:
    store = await filled_store(record("a", [1.0, 0.0]))
    kb = KnowledgeBase("kb", "d", Fixed(dimensions=3), store, collection="c")
    with pytest.raises(ValueError, match="dimension mismatch"):
        await kb.add_texts(["hello"])
    with pytest.raises(ValueError, match="dimension mismatch"):
        await kb.search(["hello"])


def test_cosine_of_zero_vectors_is_the_worst_score() -> None:
    assert cosine_similarity([0.0, 0.0], [0.0, 0.0]) == -1.0
    assert cosine_similarity([1.0, 0.0], [0.0, 0.0]) == -1.0
    assert cosine_similarity([3.0, 4.0], [6.0, 8.0]) == pytest.approx(1.0)


async def test_zero_vectors_rank_last() -> None:
    store = await filled_store(
        record("zero", [0.0, 0.0]), record("opposite", [-1.0, -0.01]), record("same", [1.0, 0.0])
    )
    hits = await store.search("c", [1.0, 0.0], top_k=3)
    assert [h.document_id for h in hits] == ["same", "opposite", "zero"]
    assert hits[-1].score == -1.0
    assert await store.search("c", [0.0, 0.0], top_k=1) != []  # a zero query still answers


async def test_delete_then_reinsert_replaces_a_document() -> None:
    store = await filled_store(record("doc", [1.0, 0.0], text="old"), record("other", [0.0, 1.0]))
    await store.delete("c", "missing")  # unknown document: no-op
    await store.delete("nowhere", "doc")  # unknown collection: no-op
    await store.delete("c", "doc")
    await store.insert("c", [record("doc", [1.0, 0.0], text="new")])
    hits = await store.search("c", [1.0, 0.0], top_k=5)
    assert [(h.document_id, h.chunk.text) for h in hits] == [("doc", "new"), ("other", "t")]


async def test_knowledge_base_delete_stays_in_its_scope() -> None:
    store = InMemoryVectorStore()
    mine = KnowledgeBase("a", "d", Fixed(), store, collection="shared", metadata_filter={"t": 1})
    theirs = KnowledgeBase("b", "d", Fixed(), store, collection="shared", metadata_filter={"t": 2})
    await mine.insert_document([Chunk(content="mine")], document_id="same-id")
    await theirs.insert_document([Chunk(content="theirs")], document_id="same-id")
    await mine.delete_document("same-id")
    assert await mine.list_documents() == []
    assert [c.text for c in await theirs.list_chunks("same-id")] == ["theirs"]
    assert [h.chunk.text for h in await theirs.search(["q"])] == ["theirs"]


async def test_knowledge_base_search_ties_and_top_k_larger_than_the_store() -> None:
    store = InMemoryVectorStore()
    kb = KnowledgeBase("kb", "d", Fixed(), store)
    ids = await kb.add_texts(["one", "two", "three"])
    hits = await kb.search(["q", "q again"], top_k=10)
    assert [h.document_id for h in hits] == ids  # equal scores: insertion order, deduplicated
    assert await kb.search(["q"], top_k=0) == []
    assert await kb.search([], top_k=3) == []


# -- the embedding base and the OpenAI model over loopback -------------------------------------


class Fixed(EmbeddingModelBase):
    """Every text → a fixed unit vector; counts provider batches."""

    def __init__(self, model: str = "fixed", *, dimensions: int = 2, **kwargs: Any) -> None:
        super().__init__(model, dimensions=dimensions, **kwargs)
        self.batches: list[list[Any]] = []

    async def _call_api(self, batch: list[Any], **kwargs: Any) -> EmbeddingResponse:
        self.batches.append(list(batch))
        await trio.lowlevel.checkpoint()
        vector = [1.0] + [0.0] * (self.dimensions - 1)
        return EmbeddingResponse(
            embeddings=[list(vector) for _ in batch], usage=EmbeddingUsage(tokens=1)
        )


async def test_cache_key_includes_model_dimensions_and_kwargs() -> None:
    cache = InMemoryEmbeddingCache()
    small = Fixed("m1", dimensions=2, cache=cache)
    wide = Fixed("m1", dimensions=3, cache=cache)
    other = Fixed("m2", dimensions=2, cache=cache)
    assert (await small(["x"])).embeddings == [[1.0, 0.0]]
    assert (await wide(["x"])).embeddings == [[1.0, 0.0, 0.0]]
    assert (await other(["x"])).source == "api"
    assert (await small(["x"], user="u")).source == "api"
    assert (await small(["x"])).source == "cache"
    assert [len(m.batches) for m in (small, wide, other)] == [2, 1, 1]
    assert len(cache) == 4


@pytest.fixture
async def server(nursery: trio.Nursery) -> OpenAICompatibleServer:
    server: OpenAICompatibleServer = await nursery.start(
        partial(serve_openai_compatible, [], api_key=KEY)
    )
    return server


def embedder(server: OpenAICompatibleServer, **kwargs: Any) -> OpenAIEmbeddingModel:
    kwargs.setdefault("dimensions", 2)
    kwargs.setdefault("read_timeout", None)
    kwargs.setdefault("connect_timeout", None)
    return OpenAIEmbeddingModel(
        "text-embedding-3-small",
        credential=OpenAICredential(api_key=KEY, base_url=server.base_url),
        **kwargs,
    )


def vec(text: str) -> list[float]:
    return [float(len(text)), float(ord(text[0]))]


def data_for(texts: list[str], order: list[int]) -> dict[str, Any]:
    return {"data": [{"index": i, "embedding": vec(texts[i])} for i in order]}


async def test_http_500_is_retried_then_raised(
    server: OpenAICompatibleServer, autojump_clock: trio.testing.MockClock
) -> None:
    server.add_route(
        "POST",
        "/v1/embeddings",
        lambda r: ScriptedResponse.json({"error": {"message": "boom"}}, status=500),
    )
    async with embedder(server, max_retries=2, retry_delay=3.0) as model:
        start = trio.current_time()
        with pytest.raises(ModelUpstreamError, match="boom") as caught:
            await model(["x"])
    assert caught.value.status_code == 500
    assert len(server.requests) == 3
    assert trio.current_time() - start == pytest.approx(6.0)


async def test_fewer_vectors_than_inputs_name_the_missing_ones(
    server: OpenAICompatibleServer,
) -> None:
    texts = ["aa", "b", "cccc"]
    server.add_route(
        "POST", "/v1/embeddings", lambda r: ScriptedResponse.json(data_for(texts, [2, 0]))
    )
    async with embedder(server, max_retries=0) as model:
        with pytest.raises(ModelUpstreamError, match=r"no vector for input\(s\) \[1\]"):
            await model(texts)


async def test_shuffled_indexes_are_placed_and_duplicates_fail(
    server: OpenAICompatibleServer,
) -> None:
    texts = ["aa", "b", "cccc", "dd"]
    answers = [data_for(texts, [3, 1, 0, 2]), data_for(texts, [0, 1, 1, 3])]
    server.add_route("POST", "/v1/embeddings", lambda r: ScriptedResponse.json(answers.pop(0)))
    async with embedder(server, max_retries=0) as model:
        assert (await model(texts)).embeddings == [vec(t) for t in texts]
        with pytest.raises(ModelUpstreamError, match=r"\[2\]"):
            await model(texts)


async def test_a_trailing_extra_vector_is_ignored(server: OpenAICompatibleServer) -> None:
    payload = {
        "data": [
            {"index": 1, "embedding": [0.0, 1.0]},
            {"index": 0, "embedding": [1.0, 0.0]},
            {"index": 9, "embedding": [5.0, 5.0]},  # beyond the inputs, at position 2
        ]
    }
    server.add_route("POST", "/v1/embeddings", lambda r: ScriptedResponse.json(payload))
    async with embedder(server, max_retries=0) as model:
        assert (await model(["a", "b"])).embeddings == [[1.0, 0.0], [0.0, 1.0]]


async def test_a_cancelled_multi_batch_call_closes_every_connection(
    server: OpenAICompatibleServer,
) -> None:
    server.add_route(
        "POST", "/v1/embeddings", lambda r: ScriptedResponse(body=[b"{"], stall_after=0)
    )
    async with embedder(server, batch_size=1) as model:
        with trio.fail_after(10):
            with trio.CancelScope() as scope:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(model, ["a", "b", "c"])
                    await server.wait_until(lambda: len(server.requests) == 3)
                    scope.cancel()
            assert scope.cancelled_caught
            await server.wait_all_closed()
        assert all(c.closed_by_client for c in server.connections)
        server.add_route(
            "POST",
            "/v1/embeddings",
            lambda r: ScriptedResponse.json(data_for(r.body["input"], [0])),
        )
        with trio.fail_after(10):
            assert (await model(["zz"])).embeddings == [vec("zz")]  # the client still works


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


# -- found by this hunt, fixed ---------------------------------------------------------------------


async def test_a_nan_record_does_not_break_the_ranking() -> None:
    store = InMemoryVectorStore()
    await store.create_collection("c", 2)
    await store.insert(
        "c",
        [
            record("half", [0.5, 0.5]),
            record("nan", [math.nan, 0.0]),
            record("same", [1.0, 0.0]),
        ],
    )
    hits = await store.search("c", [1.0, 0.0], top_k=3)
    assert [h.document_id for h in hits] == ["same", "half", "nan"]


@pytest.mark.parametrize("scale", [1e-200, 1e200])
def test_cosine_survives_extreme_magnitudes(scale: float) -> None:
    assert cosine_similarity([scale, 0.0], [scale, 0.0]) == pytest.approx(1.0)
    assert cosine_similarity([scale, scale], [scale, scale]) == pytest.approx(1.0)
    assert cosine_similarity([scale, 0.0], [0.0, scale]) == pytest.approx(0.0)


def test_split_text_never_yields_a_piece_contained_in_its_predecessor() -> None:
    text = "a😀b😀c😀d"  # mixed widths, overlap = chunk_size - 1
    pieces = split_text(text, chunk_size=2, overlap=1)
    for left, right in itertools.pairwise(pieces):
        assert not left.endswith(right), (left, right, pieces)
    assert pieces == ["a😀b", "b😀c", "c😀d"]


async def test_an_out_of_range_index_never_overwrites_a_placed_vector(
    server: OpenAICompatibleServer,
) -> None:
    payload = {
        "data": [
            {"index": 1, "embedding": [0.0, 1.0]},
            {"index": 9, "embedding": [5.0, 5.0]},
            {"index": 0, "embedding": [1.0, 0.0]},
        ]
    }
    server.add_route("POST", "/v1/embeddings", lambda r: ScriptedResponse.json(payload))
    async with embedder(server, max_retries=0) as model:
        response = await model(["a", "b"])
    assert response.embeddings == [[1.0, 0.0], [0.0, 1.0]]
