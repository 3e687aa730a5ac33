"""``EndMarker``: each answer in the context says how its reply ended.

The context keeps an interrupted answer exactly as it was cut off, with nothing that tells it
from a completed one; a page reloading the thread wants to show "[interrupted]" under it.  This
middleware (the app places it right inside the session's) writes the end reason into the
answer's ``metadata["finished_reason"]`` when the end event passes, before the session saves.
"""

from __future__ import annotations

from .._core.chain import Kwargs
from ..agent import AgentLike, ReplyItem
from ..event import ReplyEndEvent
from ..middleware import Emit, MiddlewareBase, NextHandler

__all__ = ["FINISHED_REASON", "EndMarker"]

FINISHED_REASON = "finished_reason"


class EndMarker(MiddlewareBase):
    """Marks each reply's answer with its end reason (see the module docstring)."""

    async def get_middleware_key(self) -> str:
        return "web_end_marker"

    async def on_reply(
        self,
        agent: AgentLike,
        input_kwargs: Kwargs,
        next_handler: NextHandler[ReplyItem],
        emit: Emit[ReplyItem],
    ) -> None:
        async def sink(item: ReplyItem) -> None:
            if isinstance(item, ReplyEndEvent):
                answer = agent.state.reply_message(agent.name)
                if answer is not None and answer.id == item.reply_id:
                    answer.metadata[FINISHED_REASON] = str(item.finished_reason)
            await emit(item)

        await next_handler(sink)
