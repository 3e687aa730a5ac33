"""Tool results: :class:`ToolChunk` (one increment) and :class:`ToolResponse` (the whole result).

A tool streams chunks; the toolkit accumulates them into one response with
:meth:`ToolResponse.append_chunk`:

1. blocks are matched by ``id``: text + text concatenates; base64 data + base64 data merges the
   payloads by bytes (:func:`~trioagent._blocks.merge_base64`), taking the newer non-empty
   ``name`` and ``media_type``; data where either side is a URL raises ``ValueError``; different
   block kinds sharing an id append a copy under a fresh id; unknown ids append a deep copy;
2. state: an ``error`` chunk makes the response ``error`` for good; otherwise ``interrupted`` /
   ``denied`` chunks set that state (the last one wins); ``running`` / ``success`` never change it;
3. metadata is updated with the chunk's, except the transient ``mcp_progress`` key;
4. consecutive text blocks collapse into the first of their run (DataBlocks never merge by
   adjacency) — which is why a text id can "disappear" into its predecessor.

This module also converts whatever a tool function returns into a chunk
(:func:`chunk_from_value`); see :class:`~trioagent.tool.FunctionTool` for the rules.
"""

from __future__ import annotations

import json
from typing import TypeAlias

import attrs

from .._blocks import merge_base64
from .._core.copying import deep_copy
from .._core.emit import Emit as ChainEmit
from .._core.ids import generate_id
from .._core.json_types import JSONObject
from ..message import Base64Source, DataBlock, TextBlock, ToolResultState
from ..serialization import unstructure

__all__ = [
    "Emit",
    "ToolChunk",
    "ToolResponse",
    "chunk_from_response",
    "chunk_from_value",
    "error_chunk",
]

#: The reserved chunk-metadata key for transient progress; never accumulated.
MCP_PROGRESS_KEY = "mcp_progress"

_FINAL_STATES = frozenset(
    {
        ToolResultState.SUCCESS,
        ToolResultState.ERROR,
        ToolResultState.DENIED,
        ToolResultState.INTERRUPTED,
    }
)


def _check_content(instance: object, attribute: object, value: object) -> None:
    if not isinstance(value, list) or not all(isinstance(b, TextBlock | DataBlock) for b in value):
        raise TypeError(f"{type(instance).__name__}.content must be a list of TextBlock/DataBlock")


def _check_final_state(instance: object, attribute: object, value: object) -> None:
    if value not in _FINAL_STATES:
        raise ValueError(
            f"ToolResponse.state must be success, error, denied or interrupted, got {str(value)!r}"
        )


@attrs.define(kw_only=True)
class ToolChunk:
    """One increment of a tool result.

    Blocks of one piece of multimodal data split across chunks must reuse the same block ``id``
    so that they merge.  ``metadata["mcp_progress"]`` is transient progress that the response
    never accumulates.
    """

    content: list[TextBlock | DataBlock] = attrs.field(validator=_check_content)
    state: ToolResultState = attrs.field(default=ToolResultState.RUNNING, converter=ToolResultState)
    is_last: bool = True
    metadata: JSONObject = attrs.field(factory=dict)
    id: str = attrs.field(factory=generate_id)


@attrs.define(kw_only=True)
class ToolResponse:
    """The accumulated result of a tool call; the toolkit sets ``id`` to the call's id.

    ``state`` is ``success`` (default), ``error``, ``denied`` or ``interrupted`` — never
    ``running``.
    """

    content: list[TextBlock | DataBlock] = attrs.field(factory=list, validator=_check_content)
    state: ToolResultState = attrs.field(
        default=ToolResultState.SUCCESS,
        converter=ToolResultState,
        validator=_check_final_state,
    )
    metadata: JSONObject = attrs.field(factory=dict)
    id: str = attrs.field(factory=generate_id)

    def append_chunk(self, chunk: ToolChunk) -> ToolResponse:
        """Accumulate ``chunk`` into this response (in place) and return ``self``.

        Raises:
            ValueError: a data block with a URL source (or a different source kind) shares its
                id with an existing data block — such data cannot be merged.
        """
        index = {block.id: i for i, block in enumerate(self.content)}
        for block in chunk.content:
            position = index.get(block.id)
            if position is None:
                self.content.append(deep_copy(block))
                index[block.id] = len(self.content) - 1
                continue
            target = self.content[position]
            if isinstance(target, TextBlock) and isinstance(block, TextBlock):
                target.text += block.text
            elif isinstance(target, DataBlock) and isinstance(block, DataBlock):
                _merge_data(target, block)
            else:
                fresh = deep_copy(block)
                fresh.id = generate_id()
                self.content.append(fresh)

        if chunk.state == ToolResultState.ERROR:
            self.state = ToolResultState.ERROR
        elif self.state != ToolResultState.ERROR and chunk.state in (
            ToolResultState.INTERRUPTED,
            ToolResultState.DENIED,
        ):
            self.state = chunk.state

        self.metadata.update({k: v for k, v in chunk.metadata.items() if k != MCP_PROGRESS_KEY})

        merged: list[TextBlock | DataBlock] = []
        for block in self.content:
            previous = merged[-1] if merged else None
            if isinstance(block, TextBlock) and isinstance(previous, TextBlock):
                previous.text += block.text
            else:
                merged.append(block)
        self.content = merged
        return self

    def text(self, sep: str = "") -> str:
        """The text of all text blocks, joined by ``sep``."""
        return sep.join(b.text for b in self.content if isinstance(b, TextBlock))


def _merge_data(target: DataBlock, block: DataBlock) -> None:
    if not (isinstance(target.source, Base64Source) and isinstance(block.source, Base64Source)):
        raise ValueError(
            "Cannot append DataBlock with URL source or different source types: "
            f"{target.source} vs {block.source}"
        )
    target.source.data = merge_base64(target.source.data, block.source.data)
    target.name = block.name or target.name
    target.source.media_type = block.source.media_type or target.source.media_type


#: How a tool, a middleware or the toolkit passes chunks outward.
Emit: TypeAlias = ChainEmit[ToolChunk]


def error_chunk(text: str) -> ToolChunk:
    """A one-text-block chunk in state ``error`` (how failures reach the model)."""
    return ToolChunk(content=[TextBlock(text=text)], state=ToolResultState.ERROR)


def chunk_from_response(response: ToolResponse) -> ToolChunk:
    """A chunk carrying a response's content, state and metadata (deep-copied)."""
    return ToolChunk(
        content=deep_copy(response.content),
        state=response.state,
        metadata=dict(response.metadata),
    )


def chunk_from_value(value: object) -> ToolChunk | None:
    """Convert a tool function's return value (or one yielded item) into a chunk.

    ``None`` → no chunk; :class:`ToolChunk` → itself; :class:`ToolResponse` → a chunk with its
    content, state and metadata; ``str`` → one text block; a ``TextBlock`` / ``DataBlock`` or a
    non-empty list of them → those blocks; an attrs instance → its JSON (via the library's
    converter); anything else → ``json.dumps(value, ensure_ascii=False)``, falling back to
    ``str(value)`` when it is not JSON-serializable.  Converted chunks are in state ``running``.
    """
    if value is None:
        return None
    if isinstance(value, ToolChunk):
        return value
    if isinstance(value, ToolResponse):
        return chunk_from_response(value)
    if isinstance(value, TextBlock | DataBlock):
        return ToolChunk(content=[value])
    if (
        isinstance(value, list | tuple)
        and value
        and all(isinstance(b, TextBlock | DataBlock) for b in value)
    ):
        return ToolChunk(content=list(value))
    text = value if isinstance(value, str) else _to_json_text(value)
    return ToolChunk(content=[TextBlock(text=text)])


def _to_json_text(value: object) -> str:
    if attrs.has(type(value)):
        try:
            value = unstructure(value)
        except Exception:  # an attrs class the converter cannot handle
            return str(value)
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(value)
