"""``Emit``: the callback through which a layer passes an item outward, toward the consumer.

Every streaming path (the agent's hooks, tool calls, model calls) hands items on by awaiting an
``Emit[T]``; ``T`` says what travels on that path (``AgentEvent``, ``ToolChunk``,
``ChatResponse``, ...).  A bare ``Emit`` accepts any item, for code that only passes items on.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeAlias

from typing_extensions import TypeVar

__all__ = ["Emit"]

T_contra = TypeVar("T_contra", contravariant=True, default=Any)

Emit: TypeAlias = Callable[[T_contra], Awaitable[None]]
