"""RAG data types: documents, chunks, vector records and search results.

* :class:`Document` — something to index: a text (split into chunks by the knowledge base) or
  one multimodal :class:`~trioagent.message.DataBlock` (indexed whole), with the ``source``
  it is cited by.
* :class:`Chunk` — one indexed piece: its content, its source, its position in the document
  and its metadata.
* :class:`VectorRecord` — a chunk with its embedding, about to be inserted into a store.
* :class:`VectorSearchResult` — a chunk a search found, with its score (higher is better).
* :class:`DocumentSummary` — one indexed document as a store lists it.
"""

from __future__ import annotations

from typing import Any

import attrs

from .._core.ids import generate_id
from .._core.json_types import JSONObject
from ..message import DataBlock, TextBlock

__all__ = ["Chunk", "Document", "DocumentSummary", "VectorRecord", "VectorSearchResult"]


def _check_content(
    instance: object, attribute: attrs.Attribute[TextBlock | DataBlock], value: object
) -> None:
    if not isinstance(value, TextBlock | DataBlock):
        raise TypeError(
            f"{type(instance).__name__}.content must be a TextBlock or a DataBlock, "
            f"got {type(value).__name__}"
        )


def _text_block(value: object) -> Any:  # the validator rejects what is not a block
    return TextBlock(text=value) if isinstance(value, str) else value


@attrs.define(kw_only=True)
class Chunk:
    """One indexed piece of a document.

    Attributes:
        content: the text (a :class:`~trioagent.message.TextBlock`; a ``str`` is wrapped) or
            the multimodal data of the piece.
        source: what the piece is cited by (a file name, a URL, ...); search results show it
            as ``(source: ...)``.
        chunk_index: the piece's position in its document, ``0..total_chunks-1``.
        total_chunks: how many pieces the document has.
        metadata: free payload; stores filter on it (``metadata_filter``).
    """

    content: TextBlock | DataBlock = attrs.field(converter=_text_block, validator=_check_content)
    source: str = ""
    chunk_index: int = 0
    total_chunks: int = 1
    metadata: JSONObject = attrs.field(factory=dict)

    @property
    def text(self) -> str | None:
        """The chunk's text, ``None`` for a multimodal chunk."""
        return self.content.text if isinstance(self.content, TextBlock) else None


@attrs.define(kw_only=True)
class Document:
    """A document to index with :meth:`~trioagent.rag.KnowledgeBase.add_documents`.

    Attributes:
        content: a text (``str`` or ``TextBlock``), split into chunks by the knowledge base's
            splitter, or a ``DataBlock`` (an image, ...), indexed as one chunk.
        source: what its chunks are cited by (defaults to the document id).
        metadata: copied into every chunk's metadata.
        id: the document id shared by its chunks (``delete_document`` removes them together).
    """

    content: TextBlock | DataBlock = attrs.field(converter=_text_block, validator=_check_content)
    source: str = ""
    metadata: JSONObject = attrs.field(factory=dict)
    id: str = attrs.field(factory=generate_id)


@attrs.define(kw_only=True)
class VectorRecord:
    """A chunk and its embedding, as inserted into a vector store."""

    vector: list[float]
    document_id: str
    chunk: Chunk


@attrs.define(kw_only=True)
class VectorSearchResult:
    """A search hit: the chunk, its document and its score (always higher = more similar; a
    store whose metric is a distance negates it)."""

    score: float
    document_id: str
    chunk: Chunk


@attrs.define(kw_only=True)
class DocumentSummary:
    """One indexed document: its id, its source and metadata (from its first chunk) and how
    many chunks it has."""

    document_id: str
    source: str
    chunk_count: int
    metadata: JSONObject = attrs.field(factory=dict)
