"""Splitting documents into chunks by an approximate token count (AgentScope's
``ApproxTokenChunker``).

A string's size in tokens is approximated as ``len(text.encode("utf-8")) // 4`` — no
tokenizer needed, and within the right order of magnitude for LLM tokenizers.  A text that
fits ``chunk_size`` stays whole; a longer one is cut into pieces of at most
``chunk_size * 4`` UTF-8 bytes, consecutive pieces sharing about ``overlap * 4`` bytes.  Cuts
fall between characters (never inside a multi-byte one), not at word boundaries.
Whitespace-only pieces are dropped; a ``DataBlock`` document is one chunk.
"""

from __future__ import annotations

import bisect
import itertools

from ..message import DataBlock, TextBlock
from ._types import Chunk, Document

__all__ = ["approx_tokens", "chunk_document", "split_text"]


def approx_tokens(text: str) -> int:
    """The approximate token count of ``text``: UTF-8 bytes // 4."""
    return len(text.encode("utf-8")) // 4


def _check(chunk_size: int, overlap: int) -> None:
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    if overlap < 0 or overlap >= chunk_size:
        raise ValueError(
            f"overlap must be >= 0 and less than chunk_size, got overlap={overlap}, "
            f"chunk_size={chunk_size}"
        )


def split_text(text: str, chunk_size: int = 512, overlap: int = 50) -> list[str]:
    """Cut ``text`` into pieces of at most ``chunk_size`` approximate tokens.

    Raises:
        ValueError: ``chunk_size < 1`` or ``overlap`` not in ``[0, chunk_size)``.
    """
    _check(chunk_size, overlap)
    if approx_tokens(text) <= chunk_size:
        return [text]
    # offsets[i] = UTF-8 length of text[:i]
    offsets = [0, *itertools.accumulate(len(c.encode("utf-8")) for c in text)]
    budget = chunk_size * 4
    shared = overlap * 4
    pieces: list[str] = []
    start = 0
    while start < len(text):
        end = bisect.bisect_right(offsets, offsets[start] + budget) - 1
        end = max(end, start + 1)  # progress even when one character exceeds the budget
        pieces.append(text[start:end])
        if end >= len(text):
            break
        back = bisect.bisect_right(offsets, offsets[end] - shared) - 1
        start = max(back, start + 1)
        # The next piece must reach past this one: with characters of mixed widths the overlap
        # can round up, and the next piece's end down, to this same end.
        while start < end and bisect.bisect_right(offsets, offsets[start] + budget) - 1 <= end:
            start += 1
    return pieces


def chunk_document(document: Document, chunk_size: int = 512, overlap: int = 50) -> list[Chunk]:
    """The chunks of one document, numbered ``0..N-1`` with ``total_chunks = N``.

    Each chunk gets the document's ``source`` (its id when the source is empty) and a copy of
    its metadata.  A whitespace-only text gives no chunk.
    """
    source = document.source or document.id
    content = document.content
    if isinstance(content, TextBlock):
        contents: list[TextBlock | DataBlock] = [
            TextBlock(text=piece)
            for piece in split_text(content.text, chunk_size, overlap)
            if piece.strip()
        ]
    else:
        contents = [content]
    chunks = [Chunk(content=c, source=source, metadata=dict(document.metadata)) for c in contents]
    for index, chunk in enumerate(chunks):
        chunk.chunk_index = index
        chunk.total_chunks = len(chunks)
    return chunks
