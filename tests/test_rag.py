"""trioagent.rag: the embedding base (batching, concurrency, retries, cache), the OpenAI
embedding model over a loopback ``/v1/embeddings`` route, the in-memory vector store, the text
splitter and the knowledge base; and their edge cases (chunk boundaries and multi-byte
characters, store ties and dimension mismatches, zero and NaN vectors, HTTP errors, short or
shuffled embedding answers, a cancelled multi-batch call)."""

from __future__ import annotations

import base64
import itertools
import json
import math
import random
import struct
from functools import partial
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from trioagent.credential import OpenAICredential
from trioagent.exception import (
    ModelInvalidRequestError,
    ModelTimeoutError,
    ModelUpstreamError,
)
from trioagent.message import Base64Source, DataBlock, TextBlock
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
    approx_tokens,
    chunk_document,
    cosine_similarity,
    split_text,
)
from trioagent.testing import (
    OpenAICompatibleServer,
    RecordedRequest,
    ScriptedResponse,
    serve_openai_compatible,
)

KEY = "sk-embed-test-1234"


# -- fakes ------------------------------------------------------------------------------------


class TableEmbedding(EmbeddingModelBase):
    """Embeds by table lookup (default ``fallback``); records every batch and every call."""

    def __init__(
        self,
        table: dict[str, list[float]] | None = None,
        *,
        dimensions: int = 3,
        fallback: list[float] | None = None,
        multimodal: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__("table", dimensions=dimensions, **kwargs)
        self.table = table or {}
        self.fallback = fallback or [1.0, 0.0, 0.0]
        self.multimodal = multimodal
        self.batches: list[list[Any]] = []
        self.calls: list[list[Any]] = []

    @property
    def supports_multimodal(self) -> bool:  # type: ignore[override]
        return self.multimodal

    async def __call__(self, inputs: Any, **kwargs: Any) -> EmbeddingResponse:
        self.calls.append(list(inputs))
        return await super().__call__(inputs, **kwargs)

    async def _call_api(self, batch: list[Any], **kwargs: Any) -> EmbeddingResponse:
        self.batches.append(list(batch))
        await trio.lowlevel.checkpoint()
        vectors = [
            list(self.table.get(item, self.fallback)) if isinstance(item, str) else [0.0, 0.0, 1.0]
            for item in batch
        ]
        return EmbeddingResponse(embeddings=vectors, usage=EmbeddingUsage(tokens=len(batch)))


def image() -> DataBlock:
    return DataBlock(source=Base64Source(data="aGVsbG8=", media_type="image/png"))


# -- the OpenAI embedding model over loopback ----------------------------------------------------


@pytest.fixture
async def server(nursery: trio.Nursery) -> OpenAICompatibleServer:
    server: OpenAICompatibleServer = await nursery.start(
        partial(serve_openai_compatible, [], api_key=KEY)
    )
    return server


def embedder(server: OpenAICompatibleServer, **kwargs: Any) -> OpenAIEmbeddingModel:
    kwargs.setdefault("dimensions", 3)
    kwargs.setdefault("read_timeout", None)
    kwargs.setdefault("connect_timeout", None)
    return OpenAIEmbeddingModel(
        "text-embedding-3-small",
        credential=OpenAICredential(api_key=KEY, base_url=server.base_url),
        **kwargs,
    )


def vector_of(text: str) -> list[float]:
    """A deterministic 3-vector per text (so order mix-ups show)."""
    return [float(len(text)), float(ord(text[0])), 1.0]


def answer_embeddings(request: RecordedRequest, *, reverse: bool = False) -> ScriptedResponse:
    texts = request.body["input"]
    data = [
        {"object": "embedding", "index": i, "embedding": vector_of(t)} for i, t in enumerate(texts)
    ]
    if reverse:
        data.reverse()  # placed by "index", not by position
    return ScriptedResponse.json(
        {"object": "list", "data": data, "usage": {"prompt_tokens": 7, "total_tokens": 7}}
    )


async def test_openai_embeddings_request_and_response(server: OpenAICompatibleServer) -> None:
    seen: list[RecordedRequest] = []

    def handler(request: RecordedRequest) -> ScriptedResponse:
        seen.append(request)
        return answer_embeddings(request, reverse=True)

    server.add_route("POST", "/v1/embeddings", handler)
    async with embedder(server, parameters={"user": "u-1"}) as model:
        response = await model(["Paris", TextBlock(text="cats")])
    assert response.embeddings == [vector_of("Paris"), vector_of("cats")]
    assert response.source == "api"
    assert response.usage is not None
    assert response.usage.tokens == 7
    [request] = seen
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.body == {
        "model": "text-embedding-3-small",
        "input": ["Paris", "cats"],
        "encoding_format": "float",
        "dimensions": 3,
        "user": "u-1",
    }
    assert KEY not in repr(model)


async def test_openai_embeddings_batches_run_concurrently_and_keep_order(
    server: OpenAICompatibleServer,
) -> None:
    arrived = 0
    all_in = trio.Event()

    async def handler(request: RecordedRequest) -> ScriptedResponse:
        nonlocal arrived
        arrived += 1
        if arrived == 3:
            all_in.set()
        await all_in.wait()  # only answers once every batch is in flight at the same time
        return answer_embeddings(request)

    server.add_route("POST", "/v1/embeddings", handler)
    texts = ["a", "bb", "ccc", "dddd", "eeeee"]
    async with embedder(server, batch_size=2) as model:
        with trio.fail_after(10):
            response = await model(texts)
    assert response.embeddings == [vector_of(t) for t in texts]
    assert response.usage is not None
    assert response.usage.tokens == 21
    assert sorted(len(r.body["input"]) for r in server.requests) == [1, 2, 2]


async def test_openai_embeddings_retry_a_503_then_succeed(
    server: OpenAICompatibleServer, autojump_clock: trio.testing.MockClock
) -> None:
    answers = [ScriptedResponse.json({"error": {"message": "overloaded"}}, status=503)]

    def handler(request: RecordedRequest) -> ScriptedResponse:
        return answers.pop(0) if answers else answer_embeddings(request)

    server.add_route("POST", "/v1/embeddings", handler)
    async with embedder(server, retry_delay=2.0) as model:
        start = trio.current_time()
        response = await model(["x"])
    assert response.embeddings == [vector_of("x")]
    assert len(server.requests) == 2
    assert trio.current_time() - start == pytest.approx(2.0)


async def test_openai_embeddings_do_not_retry_a_400(server: OpenAICompatibleServer) -> None:
    server.add_route(
        "POST",
        "/v1/embeddings",
        lambda r: ScriptedResponse.json({"error": {"message": "bad input"}}, status=400),
    )
    async with embedder(server) as model:
        with pytest.raises(ModelInvalidRequestError, match="bad input"):
            await model(["x"])
    assert len(server.requests) == 1


async def test_a_failing_batch_cancels_its_siblings_and_raises_plainly(
    server: OpenAICompatibleServer,
) -> None:
    def handler(request: RecordedRequest) -> ScriptedResponse:
        if request.body["input"] == ["bad"]:
            return ScriptedResponse.json({"error": {"message": "nope"}}, status=400)
        return ScriptedResponse(body=[b"{"], stall_after=0)  # never finishes

    server.add_route("POST", "/v1/embeddings", handler)
    async with embedder(server, batch_size=1) as model:
        with trio.fail_after(10), pytest.raises(ModelInvalidRequestError, match="nope"):
            await model(["slow", "bad", "slower"])
    with trio.fail_after(10):
        await server.wait_all_closed()


async def test_a_stalled_call_times_out_and_closes_its_connection(
    server: OpenAICompatibleServer, autojump_clock: trio.testing.MockClock
) -> None:
    server.add_route(
        "POST", "/v1/embeddings", lambda r: ScriptedResponse(body=[b"{"], stall_after=0)
    )
    async with embedder(server, timeout=5.0) as model:
        with pytest.raises(ModelTimeoutError, match="total timeout"):
            await model(["x"])
    await server.wait_all_closed()
    assert server.connections[0].closed_by_client


async def test_options_base64_vectors_and_missing_vectors(server: OpenAICompatibleServer) -> None:
    packed = base64.b64encode(struct.pack("<3f", 0.5, -1.0, 2.0)).decode()
    answers = [
        ScriptedResponse.json({"data": [{"index": 0, "embedding": packed}]}),
        ScriptedResponse.json({"data": []}),
        ScriptedResponse(body=b"not json", media_type="text/plain"),
    ]
    server.add_route("POST", "/v1/embeddings", lambda r: answers.pop(0))
    async with embedder(server, pass_dimensions=False, max_retries=0) as model:
        response = await model(["x"])
        assert response.embeddings == [[0.5, -1.0, 2.0]]
        assert response.usage is not None
        assert response.usage.tokens is None
        assert "dimensions" not in server.requests[0].body
        with pytest.raises(ModelUpstreamError, match="no vector"):
            await model(["y"])
        with pytest.raises(ModelUpstreamError, match="not JSON"):
            await model(["z"])


async def test_inputs_are_checked_before_any_request(server: OpenAICompatibleServer) -> None:
    async with embedder(server) as model:
        empty = await model([])
        assert empty.embeddings == []
        assert empty.usage is not None
        assert empty.usage.tokens == 0
        with pytest.raises(ValueError, match="text only"):
            await model([image()])
        with pytest.raises(TypeError):
            await model([42])  # type: ignore[list-item]
    assert server.requests == []


def test_dimensions_are_required_and_positive() -> None:
    credential = OpenAICredential(api_key=KEY)
    with pytest.raises(ValueError, match="dimensions"):
        OpenAIEmbeddingModel(credential=credential)
    with pytest.raises(ValueError, match="positive"):
        OpenAIEmbeddingModel(credential=credential, dimensions=0)
    legacy = OpenAIEmbeddingModel(credential=credential, parameters={"dimensions": 64, "x": 1})
    assert legacy.dimensions == 64
    assert legacy.parameters == {"x": 1}  # promoted, then stripped
    assert legacy.build_body(["t"])["dimensions"] == 64


# -- the embedding base: cache, retries, merging ---------------------------------------------


class Flaky(TableEmbedding):
    """Fails its first ``failures`` calls with ``error``."""

    def __init__(self, error: Exception, failures: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.error = error
        self.failures = failures

    async def _call_api(self, batch: list[Any], **kwargs: Any) -> EmbeddingResponse:
        if self.failures:
            self.failures -= 1
            self.batches.append(list(batch))
            raise self.error
        return await super()._call_api(batch, **kwargs)


async def test_retries_honour_retry_after_and_give_up(
    autojump_clock: trio.testing.MockClock,
) -> None:
    limited = ModelUpstreamError("busy", status_code=429, retry_after=7.0)
    model = Flaky(limited, failures=1, retry_delay=1.0)
    start = trio.current_time()
    assert (await model(["a"])).embeddings == [[1.0, 0.0, 0.0]]
    assert trio.current_time() - start == pytest.approx(7.0)

    hopeless = Flaky(ModelUpstreamError("down", status_code=503), failures=10, max_retries=2)
    with pytest.raises(ModelUpstreamError, match="down"):
        await hopeless(["a"])
    assert len(hopeless.batches) == 3  # the first attempt and two retries

    plain = Flaky(RuntimeError("bug"), failures=1)
    with pytest.raises(RuntimeError, match="bug"):
        await plain(["a"])
    assert len(plain.batches) == 1  # not a retryable model error


async def test_cache_serves_known_batches_and_reports_its_source() -> None:
    cache = InMemoryEmbeddingCache()
    model = TableEmbedding({"a": [0.0, 1.0, 0.0]}, batch_size=1, cache=cache)
    first = await model(["a", "b"])
    assert first.source == "api"
    assert len(model.batches) == 2
    again = await model(["a", "b"])
    assert again.source == "cache"
    assert again.embeddings == first.embeddings
    assert len(model.batches) == 2  # nothing new reached the provider
    mixed = await model(["a", "c"])
    assert mixed.source == "api"  # only if every batch was cached
    assert len(model.batches) == 3
    await cache.clear()
    assert len(cache) == 0


async def test_lru_cache_evicts_the_oldest_entry() -> None:
    cache = InMemoryEmbeddingCache(max_entries=2)
    await cache.store([[1.0]], "a")
    await cache.store([[2.0]], "b")
    assert await cache.retrieve("a") == [[1.0]]  # "a" is now the most recent
    await cache.store([[3.0]], "c")
    assert await cache.retrieve("b") is None
    assert await cache.retrieve("a") == [[1.0]]
    await cache.store([[9.0]], "a")  # kept: no overwrite
    assert await cache.retrieve("a") == [[1.0]]
    await cache.remove("a")
    assert await cache.retrieve("a") is None


async def test_a_provider_returning_the_wrong_number_of_vectors_fails() -> None:
    class Short(TableEmbedding):
        async def _call_api(self, batch: list[Any], **kwargs: Any) -> EmbeddingResponse:
            return EmbeddingResponse(embeddings=[[1.0, 0.0, 0.0]])

    with pytest.raises(ModelUpstreamError, match="1 vectors for 2 inputs"):
        await Short()(["a", "b"])


# -- the in-memory vector store -----------------------------------------------------------------


def record(doc: str, index: int, vector: list[float], text: str = "t", **metadata: Any) -> Any:
    return VectorRecord(
        vector=vector,
        document_id=doc,
        chunk=Chunk(content=text, source=f"{doc}.txt", chunk_index=index, metadata=metadata),
    )


def test_cosine_similarity() -> None:
    assert cosine_similarity([1, 0], [2, 0]) == pytest.approx(1.0)
    assert cosine_similarity([1, 0], [0, 3]) == pytest.approx(0.0)
    assert cosine_similarity([1, 1], [-1, -1]) == pytest.approx(-1.0)
    assert cosine_similarity([0, 0], [1, 0]) == -1.0  # undefined → worst
    with pytest.raises(ValueError, match="differ"):
        cosine_similarity([1], [1, 2])


async def test_store_ranks_by_cosine_and_filters() -> None:
    store = InMemoryVectorStore()
    assert await store.search("kb", [1, 0, 0]) == []  # no collection yet
    await store.create_collection("kb", 3)
    await store.insert(
        "kb",
        [
            record("d1", 0, [1, 0, 0], tenant="a"),
            record("d2", 0, [0.6, 0.8, 0], tenant="b"),
            record("d3", 0, [0, 1, 0], tenant="a"),
        ],
    )
    hits = await store.search("kb", [1, 0, 0], top_k=2)
    assert [h.document_id for h in hits] == ["d1", "d2"]
    assert [h.score for h in hits] == pytest.approx([1.0, 0.6])
    scoped = await store.search("kb", [1, 0, 0], top_k=5, metadata_filter={"tenant": "a"})
    assert [h.document_id for h in scoped] == ["d1", "d3"]
    with pytest.raises(ValueError, match="dimension mismatch"):
        await store.insert("kb", [record("d4", 0, [1, 0])])
    with pytest.raises(ValueError, match="dimension mismatch"):
        await store.search("kb", [1, 0])
    with pytest.raises(ValueError, match="does not exist"):
        await store.insert("other", [record("d4", 0, [1, 0, 0])])
    assert len(await store.search("kb", [1, 0, 0], top_k=10)) == 3  # the bad insert added none


async def test_store_lists_pages_and_deletes_documents() -> None:
    store = InMemoryVectorStore()
    await store.create_collection("kb", 2)
    await store.insert(
        "kb",
        [record("d1", i, [1, 0], text=f"p{i}", tenant="a") for i in (2, 0, 1)]
        + [record("d2", 0, [0, 1], tenant="b")],
    )
    summaries = {s.document_id: s for s in await store.list_documents("kb")}
    assert summaries["d1"].chunk_count == 3
    assert summaries["d1"].source == "d1.txt"
    assert summaries["d1"].metadata == {"tenant": "a"}
    page = await store.list_chunks("kb", "d1", offset=1, limit=1)
    assert [c.chunk_index for c in page] == [1]
    assert [d.document_id for d in await store.list_documents("kb", {"tenant": "b"})] == ["d2"]
    await store.delete("kb", "d1", metadata_filter={"tenant": "other"})  # filter excludes all
    assert len(await store.list_chunks("kb", "d1")) == 3
    await store.delete("kb", "d1")
    assert [d.document_id for d in await store.list_documents("kb")] == ["d2"]
    await store.delete_collection("kb")
    assert not await store.has_collection("kb")


# -- splitting --------------------------------------------------------------------------------


def test_split_text_short_text_stays_whole() -> None:
    assert split_text("hello world", chunk_size=10, overlap=2) == ["hello world"]
    assert approx_tokens("a" * 40) == 10


def test_split_text_respects_the_byte_budget_and_overlaps() -> None:
    text = "".join(f"{i:03d} " for i in range(200))  # 800 bytes
    pieces = split_text(text, chunk_size=25, overlap=5)  # 100-byte pieces, 20 bytes shared
    assert len(pieces) > 1
    assert all(len(p.encode()) <= 100 for p in pieces)
    for left, right in itertools.pairwise(pieces):
        assert left[-20:] == right[:20]
    assert pieces[0] + "".join(p[20:] for p in pieces[1:]) == text


def test_split_text_never_cuts_a_multibyte_character() -> None:
    text = "é" * 300  # 2 bytes each
    pieces = split_text(text, chunk_size=10, overlap=2)
    assert all(set(p) == {"é"} and len(p.encode()) <= 40 for p in pieces)
    with pytest.raises(ValueError, match="overlap"):
        split_text(text, chunk_size=5, overlap=5)


def test_chunk_document_numbers_chunks_and_passes_data_through() -> None:
    doc = Document(content="x" * 100 + "   " + "y" * 100, source="f.md", metadata={"k": 1})
    chunks = chunk_document(doc, chunk_size=10, overlap=0)
    assert [c.chunk_index for c in chunks] == list(range(len(chunks)))
    assert {c.total_chunks for c in chunks} == {len(chunks)}
    assert all(c.source == "f.md" and c.metadata == {"k": 1} for c in chunks)
    assert all(c.text and c.text.strip() for c in chunks)  # the blank middle piece is dropped
    picture = Document(content=image(), id="img-1")
    [single] = chunk_document(picture)
    assert single.content == picture.content
    assert single.source == "img-1"  # no source: cited by its id
    assert chunk_document(Document(content="   ")) == []


# -- the knowledge base -------------------------------------------------------------------------


def kb_of(model: EmbeddingModelBase, store: InMemoryVectorStore | None = None, **kwargs: Any):
    return KnowledgeBase("kb", "test docs", model, store or InMemoryVectorStore(), **kwargs)


async def test_add_texts_then_search_ranks_and_cites() -> None:
    model = TableEmbedding(
        {
            "Paris is in France.": [1, 0, 0],
            "Cats are mammals.": [0, 1, 0],
            "paris?": [1, 0.1, 0],
        }
    )
    kb = kb_of(model)
    [paris, cats] = await kb.add_texts(["Paris is in France.", "Cats are mammals."], source="s")
    assert len(model.calls) == 1  # every chunk embedded in one call
    hits = await kb.search(["paris?"], top_k=1)
    assert [h.document_id for h in hits] == [paris]
    assert hits[0].chunk.text == "Paris is in France."
    assert hits[0].chunk.source == "s"
    assert {d.document_id for d in await kb.list_documents()} == {paris, cats}
    await kb.delete_document(paris)
    assert [h.document_id for h in await kb.search(["paris?"], top_k=5)] == [cats]


async def test_search_dedupes_hits_over_queries_and_applies_the_threshold() -> None:
    model = TableEmbedding({"a": [1, 0, 0], "b": [0, 1, 0], "q1": [1, 0, 0], "q2": [0.9, 0.1, 0]})
    kb = kb_of(model)
    await kb.add_texts(["a", "b"])
    hits = await kb.search(["q1", "q2"], top_k=5)
    assert [h.chunk.text for h in hits] == ["a", "b"]  # "a" once, with its best score
    assert hits[0].score == pytest.approx(1.0)
    strict = await kb.search(["q1", "q2"], top_k=5, score_threshold=0.5)
    assert [h.chunk.text for h in strict] == ["a"]


async def test_text_only_models_drop_data_queries_silently() -> None:
    model = TableEmbedding()
    kb = kb_of(model)
    await kb.add_texts(["a"])
    model.calls.clear()
    assert await kb.search([image()]) == []
    assert model.calls == []  # nothing left to embed: no call at all
    await kb.search([TextBlock(text="q"), image()])
    assert [[type(x).__name__ for x in call] for call in model.calls] == [["TextBlock"]]


async def test_multimodal_models_embed_data_queries_and_documents() -> None:
    model = TableEmbedding(multimodal=True)
    kb = kb_of(model)
    [doc] = await kb.add_documents([Document(content=image(), source="cat.png")])
    hits = await kb.search([image()], top_k=1)
    assert hits[0].document_id == doc
    assert hits[0].chunk.source == "cat.png"
    assert isinstance(model.calls[-1][0], DataBlock)


async def test_metadata_filter_scopes_search_and_wins_on_insert() -> None:
    store = InMemoryVectorStore()
    model = TableEmbedding()
    tenant_a = kb_of(model, store, collection="shared", metadata_filter={"tenant": "a"})
    tenant_b = kb_of(model, store, collection="shared", metadata_filter={"tenant": "b"})
    chunk = Chunk(content="mine", metadata={"tenant": "b", "page": 1})
    await tenant_a.insert_document([chunk], document_id="d", document_metadata={"page": 0, "x": 1})
    assert chunk.metadata == {"tenant": "b", "page": 1}  # the caller's chunk is not touched
    [hit] = await tenant_a.search(["q"])
    assert hit.chunk.metadata == {"x": 1, "page": 1, "tenant": "a"}
    assert await tenant_b.search(["q"]) == []
    assert await tenant_b.list_documents() == []


async def test_the_collection_is_created_once_under_concurrency() -> None:
    created: list[tuple[str, int]] = []

    class CountingStore(InMemoryVectorStore):
        async def create_collection(self, name: str, dimensions: int) -> None:
            created.append((name, dimensions))
            await super().create_collection(name, dimensions)

    kb = kb_of(TableEmbedding(dimensions=3), CountingStore())
    async with trio.open_nursery() as nursery:
        for _ in range(5):
            nursery.start_soon(kb.search, ["q"])
    assert created == [("kb", 3)]


async def test_query_vectors_are_searched_concurrently() -> None:
    entered = 0
    both = trio.Event()

    class BarrierStore(InMemoryVectorStore):
        async def search(self, *args: Any, **kwargs: Any) -> Any:
            nonlocal entered
            entered += 1
            if entered == 2:
                both.set()
            await both.wait()  # deadlocks unless both searches run at the same time
            return await super().search(*args, **kwargs)

    kb = kb_of(TableEmbedding({"q2": [0, 1, 0]}), BarrierStore())
    await kb.add_texts(["a"])
    with trio.fail_after(5):
        hits = await kb.search(["q1", "q2"])
    assert len(hits) == 1


def test_knowledge_base_arguments_are_checked() -> None:
    model = TableEmbedding()
    with pytest.raises(ValueError, match="non-empty"):
        KnowledgeBase("", "d", model, InMemoryVectorStore())
    with pytest.raises(TypeError, match="EmbeddingModelBase"):
        KnowledgeBase("kb", "d", object(), InMemoryVectorStore())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="chunk_overlap"):
        KnowledgeBase("kb", "d", model, InMemoryVectorStore(), chunk_size=4, chunk_overlap=4)


def test_chunk_and_document_types() -> None:
    chunk = Chunk(content="text")
    assert isinstance(chunk.content, TextBlock)
    assert Chunk(content=image()).text is None
    with pytest.raises(TypeError):
        Chunk(content=42)  # type: ignore[arg-type]
    assert json.loads(json.dumps(attrs.asdict(Document(content="d", id="x"))))["id"] == "x"


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


def vector_record(doc: str, vector: list[float], index: int = 0, text: str = "t") -> VectorRecord:
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
    store = await filled_store(vector_record("a", [1.0, 0.0]), vector_record("b", [0.6, 0.8]))
    hits = await store.search("c", [1.0, 0.0], top_k=50)
    assert [h.document_id for h in hits] == ["a", "b"]
    assert await store.search("c", [1.0, 0.0], top_k=0) == []
    assert await store.search("c", [1.0, 0.0], top_k=-2) == []
    empty = await filled_store()
    assert await empty.search("c", [1.0, 0.0], top_k=3) == []
    assert await empty.list_documents("c") == []
    assert await empty.list_chunks("c", "nope") == []


async def test_store_ties_keep_insertion_order() -> None:
    store = await filled_store(*(vector_record(f"d{i}", [2.0, 2.0]) for i in range(6)))
    hits = await store.search("c", [1.0, 1.0], top_k=4)
    assert [h.document_id for h in hits] == ["d0", "d1", "d2", "d3"]
    assert len({h.score for h in hits}) == 1


async def test_store_dimension_mismatches_are_clear_errors() -> None:
    store = await filled_store(vector_record("a", [1.0, 0.0]))
    with pytest.raises(ValueError, match="expected 2, got 3"):
        await store.search("c", [1.0, 0.0, 0.0])
    with pytest.raises(ValueError, match="expected 2, got 1"):
        await store.insert("c", [vector_record("b", [1.0, 0.0]), vector_record("x", [1.0])])
    assert [d.document_id for d in await store.list_documents("c")] == ["a"]  # all or none
    with pytest.raises(ValueError, match="positive"):
        await store.create_collection("d", 0)
    await store.create_collection("c", 5)  # exists: a no-op, the dimensions stay
    assert store.dimensions("c") == 2


async def test_knowledge_base_over_a_collection_of_another_size_fails_clearly() -> None:
    store = await filled_store(vector_record("a", [1.0, 0.0]))
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
        vector_record("zero", [0.0, 0.0]),
        vector_record("opposite", [-1.0, -0.01]),
        vector_record("same", [1.0, 0.0]),
    )
    hits = await store.search("c", [1.0, 0.0], top_k=3)
    assert [h.document_id for h in hits] == ["same", "opposite", "zero"]
    assert hits[-1].score == -1.0
    assert await store.search("c", [0.0, 0.0], top_k=1) != []  # a zero query still answers


async def test_delete_then_reinsert_replaces_a_document() -> None:
    store = await filled_store(
        vector_record("doc", [1.0, 0.0], text="old"), vector_record("other", [0.0, 1.0])
    )
    await store.delete("c", "missing")  # unknown document: no-op
    await store.delete("nowhere", "doc")  # unknown collection: no-op
    await store.delete("c", "doc")
    await store.insert("c", [vector_record("doc", [1.0, 0.0], text="new")])
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
    async with embedder(server, dimensions=2, max_retries=2, retry_delay=3.0) as model:
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
    async with embedder(server, dimensions=2, max_retries=0) as model:
        with pytest.raises(ModelUpstreamError, match=r"no vector for input\(s\) \[1\]"):
            await model(texts)


async def test_shuffled_indexes_are_placed_and_duplicates_fail(
    server: OpenAICompatibleServer,
) -> None:
    texts = ["aa", "b", "cccc", "dd"]
    answers = [data_for(texts, [3, 1, 0, 2]), data_for(texts, [0, 1, 1, 3])]
    server.add_route("POST", "/v1/embeddings", lambda r: ScriptedResponse.json(answers.pop(0)))
    async with embedder(server, dimensions=2, max_retries=0) as model:
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
    async with embedder(server, dimensions=2, max_retries=0) as model:
        assert (await model(["a", "b"])).embeddings == [[1.0, 0.0], [0.0, 1.0]]


async def test_a_cancelled_multi_batch_call_closes_every_connection(
    server: OpenAICompatibleServer,
) -> None:
    server.add_route(
        "POST", "/v1/embeddings", lambda r: ScriptedResponse(body=[b"{"], stall_after=0)
    )
    async with embedder(server, dimensions=2, batch_size=1) as model:
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


# -- found by this hunt, fixed ---------------------------------------------------------------------


async def test_a_nan_record_does_not_break_the_ranking() -> None:
    store = InMemoryVectorStore()
    await store.create_collection("c", 2)
    await store.insert(
        "c",
        [
            vector_record("half", [0.5, 0.5]),
            vector_record("nan", [math.nan, 0.0]),
            vector_record("same", [1.0, 0.0]),
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
    async with embedder(server, dimensions=2, max_retries=0) as model:
        response = await model(["a", "b"])
    assert response.embeddings == [[1.0, 0.0], [0.0, 1.0]]
