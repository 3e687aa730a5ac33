"""``search_memory`` and ``add_memory``: the tools that let a model search and extend its
mem0 memory itself."""

from __future__ import annotations

from collections.abc import Mapping

import trio

from .._core.concurrency import reraise_unwrapped
from .._core.json_types import JSONValue
from ..message import TextBlock, ToolResultState
from ..permission import PermissionBehavior, PermissionContext, PermissionDecision
from ..tool import Emit, ToolBase, ToolChunk
from ._mem0 import Mem0Memory

__all__ = ["AddMemoryTool", "SearchMemoryTool"]


def _error_chunk(text: str) -> ToolChunk:
    return ToolChunk(content=[TextBlock(text=text)], state=ToolResultState.ERROR)


class _MemoryTool(ToolBase):
    """A tool over one :class:`Mem0Memory`; always allowed (no permission prompt)."""

    def __init__(self, memory: Mem0Memory) -> None:
        super().__init__()
        self.memory = memory

    async def check_permissions(
        self, tool_input: Mapping[str, object], context: PermissionContext
    ) -> PermissionDecision:
        return PermissionDecision(
            behavior=PermissionBehavior.ALLOW,
            message="auto-allowed: mem0 long-term memory tool",
        )


class SearchMemoryTool(_MemoryTool):
    """``search_memory(keywords, limit=5)``: one concurrent search per keyword, merged."""

    name = "search_memory"
    description = (
        "Retrieve memories about the user from long-term memory. Give short, targeted "
        "keywords (a name, a date, a place, a phrase describing what you want to recall); "
        "each keyword is searched on its own and the results are merged without duplicates."
    )
    input_schema = {  # noqa: RUF012
        "type": "object",
        "properties": {
            "keywords": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Short search phrases, each searched independently.",
            },
            "limit": {
                "type": "integer",
                "default": 5,
                "description": "The maximum number of memories to retrieve per keyword.",
            },
        },
        "required": ["keywords"],
    }
    is_read_only = True
    is_concurrency_safe = True

    async def call(self, emit: Emit, /, **kwargs: JSONValue) -> ToolChunk | str:
        keywords: list[str] = list(kwargs.get("keywords") or [])
        limit = kwargs.get("limit")
        limit = 5 if limit is None else limit
        if not keywords:
            return "(no keywords supplied — nothing to search)"
        results: list[list[str]] = [[] for _ in keywords]
        errors: list[Exception] = []

        async def one(index: int, keyword: str, nursery: trio.Nursery) -> None:
            try:
                results[index] = await self.memory.search(keyword, top_k=limit)
            except Exception as exc:  # reported as an error chunk; Cancelled passes
                errors.append(exc)
                nursery.cancel_scope.cancel()  # as a failed gather: the siblings stop

        try:
            async with trio.open_nursery() as nursery:
                for index, keyword in enumerate(keywords):
                    nursery.start_soon(one, index, keyword, nursery)
        except BaseExceptionGroup as group:
            reraise_unwrapped(group)
        if errors:
            return _error_chunk(f"Error retrieving memory: {errors[0]}")
        merged: list[str] = []
        for texts in results:
            for text in texts:
                if text not in merged:
                    merged.append(text)
        if not merged:
            return "(no relevant memories found)"
        return "\n".join(f"- {m}" for m in merged)


class AddMemoryTool(_MemoryTool):
    """``add_memory(thinking, content)``: record facts; only ``content`` reaches mem0."""

    name = "add_memory"
    description = (
        "Record important information about the user in long-term memory for future "
        "conversations. Each content item should be one specific, self-contained fact (who, "
        "what, when, where, why). Do not re-add facts a `search_memory` result already showed."
    )
    input_schema = {  # noqa: RUF012
        "type": "object",
        "properties": {
            "thinking": {
                "type": "string",
                "description": (
                    "Why this is worth remembering. Kept in the transcript, not stored in memory."
                ),
            },
            "content": {
                "type": "array",
                "items": {"type": "string"},
                "description": "The facts to remember, one complete sentence per item.",
            },
        },
        "required": ["thinking", "content"],
    }
    is_read_only = False
    is_concurrency_safe = False

    async def call(self, emit: Emit, /, **kwargs: JSONValue) -> ToolChunk | str:
        thinking: str = kwargs.get("thinking") or ""
        content: list[str] = list(kwargs.get("content") or [])
        if not content:
            return _error_chunk("`content` is empty — nothing to record.")
        try:
            result = await self.memory.add_with_fallback("\n".join(content))
        except Exception as exc:  # reported as an error chunk; Cancelled passes
            return _error_chunk(f"Error recording memory: {exc}")
        rationale = f" (rationale: {thinking})" if thinking else ""
        return f"Successfully recorded to memory{rationale} → {result}"
