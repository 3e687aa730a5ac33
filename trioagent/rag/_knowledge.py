"""``KnowledgeBase``: one embedding model + one vector-store collection.

::

    store = InMemoryVectorStore()
    kb = KnowledgeBase("handbook", "Internal HR and onboarding documents.", embedder, store)
    await kb.add_texts(["Paid time off is 25 days a year."], source="pto.md")
    hits = await kb.search(["How many vacation days do I get?"], top_k=3)

The collection (named after the knowledge base unless ``collection`` is given) is created on
first use with the embedding model's ``dimensions``.  ``metadata_filter`` scopes the knowledge
base inside a shared collection: searches and listings never leave it, and inserted chunks
always carry its keys.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence

import attrs
import trio

from .._core.gather import gather
from .._core.ids import generate_id
from ..message import DataBlock, TextBlock
from ._chunking import chunk_document
from ._embedding import EmbeddingInput, EmbeddingModelBase
from ._store import VectorStoreBase
from ._types import Chunk, Document, DocumentSummary, VectorRecord, VectorSearchResult

__all__ = ["KnowledgeBase"]


class KnowledgeBase:
    """A searchable knowledge base.

    Args:
        name: what agents call it (the ``search_knowledge`` tool lists it; must be non-empty).
        description: what it holds and when to search it (shown to the model).
        embedding_model: embeds both the indexed chunks and the queries.
        store: the vector store (shared between knowledge bases; each uses its own collection).
        collection: the store collection (default: ``name``).
        metadata_filter: ``key: value`` pairs scoping this knowledge base in a shared
            collection.
        chunk_size: maximum approximate tokens per chunk when texts are split (see
            :func:`~trioagent.rag.split_text`).
        chunk_overlap: approximate tokens shared by consecutive chunks.

    Concurrent use from many tasks is safe: the lazy collection creation is lock-protected,
    and every fan-out (query vectors, embedding batches) runs in a nursery owned by the call.
    """

    def __init__(
        self,
        name: str,
        description: str,
        embedding_model: EmbeddingModelBase,
        store: VectorStoreBase,
        *,
        collection: str | None = None,
        metadata_filter: Mapping[str, object] | None = None,
        chunk_size: int = 512,
        chunk_overlap: int = 50,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError("KnowledgeBase name must be a non-empty string")
        if not isinstance(embedding_model, EmbeddingModelBase):
            raise TypeError(
                f"embedding_model must be an EmbeddingModelBase, got {type(embedding_model).__name__}"
            )
        if not isinstance(store, VectorStoreBase):
            raise TypeError(f"store must be a VectorStoreBase, got {type(store).__name__}")
        if chunk_size < 1 or not 0 <= chunk_overlap < chunk_size:
            raise ValueError(
                "chunk_size must be >= 1 and chunk_overlap in [0, chunk_size), got "
                f"chunk_size={chunk_size}, chunk_overlap={chunk_overlap}"
            )
        self.name = name
        self.description = description
        self.embedding_model = embedding_model
        self.store = store
        self.collection = collection or name
        self.metadata_filter: dict[str, object] | None = (
            dict(metadata_filter) if metadata_filter else None
        )
        self.chunk_size = chunk_size
        self.chunk_overlap = chunk_overlap
        self._ready = False
        self._ready_lock = trio.Lock()

    def __repr__(self) -> str:
        return (
            f"KnowledgeBase(name={self.name!r}, collection={self.collection!r}, "
            f"embedding_model={self.embedding_model!r})"
        )

    @property
    def vector_store(self) -> VectorStoreBase:
        """The vector store (AgentScope's name for :attr:`store`)."""
        return self.store

    async def ensure_collection(self) -> None:
        """Create the collection if it is missing (once; later calls are a flag check)."""
        if self._ready:
            return
        async with self._ready_lock:
            if self._ready:
                return
            if not await self.store.has_collection(self.collection):
                await self.store.create_collection(self.collection, self.embedding_model.dimensions)
            self._ready = True

    # -- search ---------------------------------------------------------------------------------

    async def search(
        self,
        queries: Sequence[EmbeddingInput],
        top_k: int = 5,
        score_threshold: float | None = None,
    ) -> list[VectorSearchResult]:
        """The chunks most similar to any of ``queries``, best first.

        A text-only embedding model silently drops ``DataBlock`` queries (so callers can pass
        a mixed list to every knowledge base); nothing left → ``[]``.  All queries are embedded
        in one call, then each vector is searched concurrently (``metadata_filter`` applied).
        Hits are deduplicated by ``(document_id, chunk_index)`` keeping the best score,
        those below ``score_threshold`` dropped, the rest sorted by score and cut to
        ``top_k``.
        """
        items = list(queries)
        if not self.embedding_model.supports_multimodal:
            items = [q for q in items if not isinstance(q, DataBlock)]
        if not items or top_k < 1:
            return []
        await self.ensure_collection()
        response = await self.embedding_model(items)

        per_query = await gather(
            [
                functools.partial(
                    self.store.search,
                    self.collection,
                    vector,
                    top_k,
                    metadata_filter=self.metadata_filter,
                )
                for vector in response.embeddings
            ]
        )
        best: dict[tuple[str, int], VectorSearchResult] = {}
        for results in per_query:
            for result in results:
                if score_threshold is not None and result.score < score_threshold:
                    continue
                key = (result.document_id, result.chunk.chunk_index)
                if key not in best or result.score > best[key].score:
                    best[key] = result
        merged = sorted(best.values(), key=lambda r: r.score, reverse=True)
        return merged[:top_k]

    # -- indexing -------------------------------------------------------------------------------

    def _scoped(self, chunk: Chunk, document_metadata: Mapping[str, object] | None) -> Chunk:
        """A copy of ``chunk`` whose metadata is document < chunk < filter."""
        return attrs.evolve(
            chunk,
            metadata={
                **(document_metadata or {}),
                **chunk.metadata,
                **(self.metadata_filter or {}),
            },
        )

    async def _embed_and_insert(self, records: list[tuple[str, Chunk]]) -> None:
        if not records:
            return
        await self.ensure_collection()
        response = await self.embedding_model([chunk.content for _, chunk in records])
        if len(response.embeddings) != len(records):
            raise RuntimeError(
                f"the embedding model returned {len(response.embeddings)} vectors for "
                f"{len(records)} chunks"
            )
        await self.store.insert(
            self.collection,
            [
                VectorRecord(vector=vector, document_id=document_id, chunk=chunk)
                for vector, (document_id, chunk) in zip(response.embeddings, records, strict=True)
            ],
        )

    async def insert_document(
        self,
        chunks: Sequence[Chunk],
        document_id: str | None = None,
        document_metadata: Mapping[str, object] | None = None,
    ) -> str:
        """Embed and insert already-made chunks as one document; returns its id.

        Each inserted chunk is a copy whose metadata merges, highest precedence first, the
        ``metadata_filter``, the chunk's own metadata and ``document_metadata``.
        """
        document_id = document_id or generate_id()
        scoped = [(document_id, self._scoped(c, document_metadata)) for c in chunks]
        await self._embed_and_insert(scoped)
        return document_id

    async def add_documents(self, documents: Sequence[Document]) -> list[str]:
        """Split, embed (one embedding call for all chunks) and insert documents; returns
        their ids.  A text is split by :func:`~trioagent.rag.chunk_document`; a ``DataBlock``
        document is one chunk (its embedding model must be multimodal)."""
        records: list[tuple[str, Chunk]] = []
        for document in documents:
            if not isinstance(document, Document):
                raise TypeError(f"expected a Document, got {type(document).__name__}")
            for chunk in chunk_document(document, self.chunk_size, self.chunk_overlap):
                records.append((document.id, self._scoped(chunk, None)))
        await self._embed_and_insert(records)
        return [document.id for document in documents]

    async def add_texts(
        self,
        texts: Sequence[str | TextBlock],
        *,
        source: str | None = None,
        metadata: Mapping[str, object] | None = None,
    ) -> list[str]:
        """Index each text as its own document (cited by ``source``, default its id)."""
        documents = [
            Document(content=text, source=source or "", metadata=dict(metadata or {}))
            for text in texts
        ]
        return await self.add_documents(documents)

    async def delete_document(self, document_id: str) -> None:
        """Remove every chunk of one document."""
        await self.ensure_collection()
        await self.store.delete(self.collection, document_id, self.metadata_filter)

    async def list_documents(self) -> list[DocumentSummary]:
        """The documents of this knowledge base."""
        await self.ensure_collection()
        return await self.store.list_documents(self.collection, self.metadata_filter)

    async def list_chunks(
        self, document_id: str, *, offset: int = 0, limit: int = 30
    ) -> list[Chunk]:
        """A page of one document's chunks, by ``chunk_index``."""
        await self.ensure_collection()
        return await self.store.list_chunks(
            self.collection,
            document_id,
            offset=offset,
            limit=limit,
            metadata_filter=self.metadata_filter,
        )
