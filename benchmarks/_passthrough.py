"""The pass-through middleware of the benchmarks: every hook implemented, everything passed
on (``await next_handler()``), so a chain of them measures the chain's own cost."""

from __future__ import annotations

from typing import Any

from trioagent.middleware import MiddlewareBase


class PassThrough(MiddlewareBase):
    """Implements every hook, passing everything through."""

    async def on_reply(self, agent: Any, kw: dict[str, Any], next_handler: Any, emit: Any) -> None:
        await next_handler()

    async def on_reasoning(
        self, agent: Any, kw: dict[str, Any], next_handler: Any, emit: Any
    ) -> None:
        await next_handler()

    async def on_acting(self, agent: Any, kw: dict[str, Any], next_handler: Any, emit: Any) -> None:
        await next_handler()

    async def on_model_call(
        self, agent: Any, kw: dict[str, Any], next_handler: Any, emit: Any
    ) -> None:
        await next_handler()

    async def on_check_permission(self, agent: Any, kw: dict[str, Any], next_handler: Any) -> Any:
        return await next_handler()

    async def on_compress_context(self, agent: Any, kw: dict[str, Any], next_handler: Any) -> None:
        await next_handler()

    async def on_system_prompt(self, agent: Any, current_prompt: str) -> str:
        return current_prompt
