"""Search hits as prompt content: numbered, cited blocks, and the hint that wraps them; and
the query a reply's input messages make."""

from __future__ import annotations

import copy
from collections.abc import Sequence

import attrs

from ..message import DataBlock, Msg, TextBlock
from ._types import VectorSearchResult

__all__ = ["NO_RESULTS_TEXT", "format_results", "query_blocks", "wrap_hint"]

#: What a search that found nothing tells the model.
NO_RESULTS_TEXT = "No relevant content found."


def format_results(results: Sequence[VectorSearchResult]) -> list[TextBlock | DataBlock]:
    """Render hits as ``[i] (source: <source>)\\n<content>`` entries separated by blank lines;
    adjacent text is coalesced into one block, data blocks stay separate (deep copies)."""
    entries: list[TextBlock | DataBlock] = []
    for index, result in enumerate(results, start=1):
        prefix = f"[{index}] (source: {result.chunk.source})\n"
        chunk_content = result.chunk.content
        if isinstance(chunk_content, TextBlock):
            entries.append(TextBlock(text=prefix + chunk_content.text))
        else:
            entries.append(TextBlock(text=prefix))
            entries.append(copy.deepcopy(chunk_content))
        if index != len(results):
            entries.append(TextBlock(text="\n\n"))
    merged: list[TextBlock | DataBlock] = []
    for entry in entries:
        previous = merged[-1] if merged else None
        if isinstance(entry, TextBlock) and isinstance(previous, TextBlock):
            merged[-1] = TextBlock(text=previous.text + entry.text)
        else:
            merged.append(entry)
    return merged


def wrap_hint(
    template: str, blocks: Sequence[TextBlock | DataBlock]
) -> str | list[TextBlock | DataBlock]:
    """Put ``blocks`` into ``template``'s ``{context}``.

    Text only → one string (the texts joined by ``"\\n"``).  With data blocks → a block list:
    the template's prefix merged into the first text block (or prepended), its suffix merged
    into the last (or appended).
    """
    if all(isinstance(b, TextBlock) for b in blocks):
        return template.format(
            context="\n".join(b.text for b in blocks if isinstance(b, TextBlock))
        )
    prefix, _, suffix = template.partition("{context}")
    wrapped = list(blocks)
    if prefix:
        first = wrapped[0]
        if isinstance(first, TextBlock):
            wrapped[0] = TextBlock(text=prefix + first.text)
        else:
            wrapped.insert(0, TextBlock(text=prefix))
    if suffix:
        last = wrapped[-1]
        if isinstance(last, TextBlock):
            wrapped[-1] = TextBlock(text=last.text + suffix)
        else:
            wrapped.append(TextBlock(text=suffix))
    return wrapped


def query_blocks(inputs: object) -> list[TextBlock | DataBlock]:
    """The query of a reply's inputs (a ``Msg`` or a list of them; anything else → ``[]``):
    each message's text and data blocks, blank texts dropped, its first text prefixed with
    ``"<name>: "``.  Copies; the inputs are not touched."""
    if isinstance(inputs, Msg):
        msgs = [inputs]
    elif isinstance(inputs, list | tuple) and all(isinstance(m, Msg) for m in inputs):
        msgs = list(inputs)
    else:
        return []
    blocks: list[TextBlock | DataBlock] = []
    for msg in msgs:
        labelled = False
        for block in msg.content:
            if isinstance(block, TextBlock):
                if not block.text.strip():
                    continue
                text = block.text if labelled else f"{msg.name}: {block.text}"
                labelled = True
                blocks.append(attrs.evolve(block, text=text))
            elif isinstance(block, DataBlock):
                blocks.append(copy.deepcopy(block))
    return blocks
