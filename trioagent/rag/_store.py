"""Vector stores: the :class:`VectorStoreBase` interface and :class:`InMemoryVectorStore`.

A store holds named collections of :class:`~trioagent.rag.VectorRecord` objects and finds the
records most similar to a query vector.  Scores are always "higher is better"; a store whose
metric is a distance negates it.  ``metadata_filter`` restricts an operation to records whose
``chunk.metadata`` equals every ``key: value`` pair of the filter.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Self

import trio

from ._types import Chunk, DocumentSummary, VectorRecord, VectorSearchResult

__all__ = ["InMemoryVectorStore", "VectorStoreBase", "cosine_similarity"]


class VectorStoreBase:
    """The interface of vector stores; an async context manager opening/closing connections
    (no-ops by default)."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        return None

    async def create_collection(self, name: str, dimensions: int) -> None:
        """Create a collection of ``dimensions``-long vectors (no-op if it exists)."""
        raise NotImplementedError

    async def delete_collection(self, name: str) -> None:
        """Delete a collection and its records."""
        raise NotImplementedError

    async def has_collection(self, name: str) -> bool:
        """Whether the collection exists."""
        raise NotImplementedError

    async def insert(self, collection: str, records: Sequence[VectorRecord]) -> None:
        """Insert records into an existing collection."""
        raise NotImplementedError

    async def delete(
        self,
        collection: str,
        document_id: str,
        metadata_filter: Mapping[str, object] | None = None,
    ) -> None:
        """Delete every record of one document (that also matches ``metadata_filter``)."""
        raise NotImplementedError

    async def search(
        self,
        collection: str,
        query_vector: Sequence[float],
        top_k: int = 5,
        metadata_filter: Mapping[str, object] | None = None,
    ) -> list[VectorSearchResult]:
        """The ``top_k`` records most similar to ``query_vector``, best first."""
        raise NotImplementedError

    async def list_documents(
        self, collection: str, metadata_filter: Mapping[str, object] | None = None
    ) -> list[DocumentSummary]:
        """One summary per document of the collection."""
        raise NotImplementedError

    async def list_chunks(
        self,
        collection: str,
        document_id: str,
        *,
        offset: int = 0,
        limit: int = 30,
        metadata_filter: Mapping[str, object] | None = None,
    ) -> list[Chunk]:
        """The chunks ``offset .. offset+limit-1`` of one document, by ``chunk_index``.

        Optional: stores that cannot list chunks raise ``NotImplementedError``.
        """
        raise NotImplementedError(f"{type(self).__name__} does not implement list_chunks()")


def cosine_similarity(left: Sequence[float], right: Sequence[float]) -> float:
    """The cosine of the angle between two vectors; ``-1.0`` when either is all zeros or holds
    a NaN or an infinity (such a record ranks last and never passes a score threshold).  Each vector is scaled by its largest component first, so very
    small or very large components neither underflow nor overflow.

    Raises:
        ValueError: the vectors differ in length.
    """
    if len(left) != len(right):
        raise ValueError(f"vector lengths differ: {len(left)} vs {len(right)}")
    scales = [max(map(abs, vector), default=0.0) for vector in (left, right)]
    if not all(math.isfinite(s) and s > 0.0 for s in scales):
        return -1.0
    a = [x / scales[0] for x in left]
    b = [x / scales[1] for x in right]
    cosine = math.fsum(x * y for x, y in zip(a, b, strict=True)) / (math.hypot(*a) * math.hypot(*b))
    return max(-1.0, min(1.0, cosine))


def _matches(metadata: Mapping[str, object], metadata_filter: Mapping[str, object] | None) -> bool:
    if not metadata_filter:
        return True
    return all(k in metadata and metadata[k] == v for k, v in metadata_filter.items())


class InMemoryVectorStore(VectorStoreBase):
    """Collections in process memory, exact cosine-similarity search in plain Python.

    For tests, examples and small knowledge bases (a search scores every record of the
    collection: O(records x dimensions)).  Records are kept as given (not copied).  Ties keep
    insertion order.  Every method is a checkpoint, so a long ingestion can be cancelled
    between calls; a call never leaves a collection half-updated.
    """

    def __init__(self) -> None:
        self._collections: dict[str, list[VectorRecord]] = {}
        self._dimensions: dict[str, int] = {}

    def __repr__(self) -> str:
        sizes = {name: len(records) for name, records in self._collections.items()}
        return f"InMemoryVectorStore({sizes})"

    def dimensions(self, name: str) -> int:
        """The vector length of a collection.

        Raises:
            KeyError: no such collection.
        """
        return self._dimensions[name]

    async def create_collection(self, name: str, dimensions: int) -> None:
        await trio.lowlevel.checkpoint()
        if isinstance(dimensions, bool) or not isinstance(dimensions, int) or dimensions <= 0:
            raise ValueError(f"dimensions must be a positive integer, got {dimensions!r}")
        if name not in self._collections:
            self._collections[name] = []
            self._dimensions[name] = dimensions

    async def delete_collection(self, name: str) -> None:
        await trio.lowlevel.checkpoint()
        self._collections.pop(name, None)
        self._dimensions.pop(name, None)

    async def has_collection(self, name: str) -> bool:
        await trio.lowlevel.checkpoint()
        return name in self._collections

    async def insert(self, collection: str, records: Sequence[VectorRecord]) -> None:
        """Insert ``records`` (all or none).

        Raises:
            ValueError: no such collection, or a vector of the wrong length.
        """
        await trio.lowlevel.checkpoint()
        if collection not in self._collections:
            raise ValueError(f"Collection {collection!r} does not exist.")
        dimensions = self._dimensions[collection]
        for record in records:
            if len(record.vector) != dimensions:
                raise ValueError(
                    f"Vector dimension mismatch in {collection!r}: expected {dimensions}, "
                    f"got {len(record.vector)}"
                )
        self._collections[collection].extend(records)

    async def delete(
        self,
        collection: str,
        document_id: str,
        metadata_filter: Mapping[str, object] | None = None,
    ) -> None:
        await trio.lowlevel.checkpoint()
        records = self._collections.get(collection)
        if records is None:
            return
        self._collections[collection] = [
            r
            for r in records
            if not (r.document_id == document_id and _matches(r.chunk.metadata, metadata_filter))
        ]

    async def search(
        self,
        collection: str,
        query_vector: Sequence[float],
        top_k: int = 5,
        metadata_filter: Mapping[str, object] | None = None,
    ) -> list[VectorSearchResult]:
        """Cosine similarity against every matching record; unknown collection → ``[]``.

        Raises:
            ValueError: ``query_vector`` has the wrong length.
        """
        await trio.lowlevel.checkpoint()
        records = self._collections.get(collection)
        if not records or top_k < 1:
            return []
        dimensions = self._dimensions[collection]
        if len(query_vector) != dimensions:
            raise ValueError(
                f"Query vector dimension mismatch in {collection!r}: expected {dimensions}, "
                f"got {len(query_vector)}"
            )
        scored = [
            (cosine_similarity(record.vector, query_vector), position, record)
            for position, record in enumerate(records)
            if _matches(record.chunk.metadata, metadata_filter)
        ]
        scored.sort(key=lambda item: (-item[0], item[1]))
        return [
            VectorSearchResult(score=score, document_id=record.document_id, chunk=record.chunk)
            for score, _, record in scored[:top_k]
        ]

    async def list_documents(
        self, collection: str, metadata_filter: Mapping[str, object] | None = None
    ) -> list[DocumentSummary]:
        await trio.lowlevel.checkpoint()
        groups: dict[str, list[VectorRecord]] = {}
        for record in self._collections.get(collection, []):
            if _matches(record.chunk.metadata, metadata_filter):
                groups.setdefault(record.document_id, []).append(record)
        return [
            DocumentSummary(
                document_id=document_id,
                source=records[0].chunk.source,
                chunk_count=len(records),
                metadata=dict(records[0].chunk.metadata),
            )
            for document_id, records in groups.items()
        ]

    async def list_chunks(
        self,
        collection: str,
        document_id: str,
        *,
        offset: int = 0,
        limit: int = 30,
        metadata_filter: Mapping[str, object] | None = None,
    ) -> list[Chunk]:
        await trio.lowlevel.checkpoint()
        chunks = [
            r.chunk
            for r in self._collections.get(collection, [])
            if r.document_id == document_id and _matches(r.chunk.metadata, metadata_filter)
        ]
        chunks.sort(key=lambda c: c.chunk_index)
        return chunks[max(0, offset) : max(0, offset) + max(0, limit)]
