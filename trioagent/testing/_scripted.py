"""``ScriptedModel``: a chat model that plays a script (a fake at the model seam).

It runs through the real :class:`~trioagent.model.ChatModelBase` machinery (the accumulator
fed in the task that runs the call, retries, the INTERRUPTED partial on cancellation; the
reader task and memory channel of ``model.stream()`` when pulled directly), so the agent sees
exactly what a provider stream would produce, without a network.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any, TypeAlias

import attrs
import trio

from .._core.copying import deep_copy
from ..exception import TrioagentError
from ..message import Msg, TextBlock, ThinkingBlock, ToolCallBlock
from ..model import ChatModelBase, ChatResponse, ChatUsage, ChunkSink, StreamAccumulator
from ..types import ToolChoice, generate_id

__all__ = [
    "ScriptError",
    "ScriptedModel",
    "ScriptedRequest",
    "Step",
    "text_chunks",
    "thinking_chunks",
    "tool_call_chunks",
]

Step: TypeAlias = (
    ChatResponse | Sequence[ChatResponse] | BaseException | Callable[["ScriptedRequest"], Any]
)


class ScriptError(TrioagentError, AssertionError):
    """The script and the calls disagree: a call nobody scripted, or steps left unplayed."""


@attrs.frozen
class ScriptedRequest:
    """One call the model received (messages deep-copied at call time)."""

    messages: list[Msg]
    tools: list[dict[str, Any]] | None
    tool_choice: ToolChoice | None


class ScriptedModel(ChatModelBase):
    """Plays ``steps``, one per call.

    A step is:

    * a ``ChatResponse`` — the whole answer (streamed as one delta when ``stream=True``);
    * a list of ``ChatResponse`` chunks — streamed deltas (share block ids across chunks to
      grow one block; see :func:`text_chunks` and :func:`tool_call_chunks`);
    * an exception — raised by the call;
    * a callable of the :class:`ScriptedRequest` (sync or async) returning one of the above.

    ``chunk_delay`` sleeps between streamed chunks (use a ``MockClock`` in tests).  Every
    request is recorded in :attr:`requests` (a copy of the messages as the call saw them);
    ``record_requests=False`` keeps none, for benchmarks and long scripted conversations,
    where copying the whole history per call would dominate.  A call with no step left raises
    :class:`ScriptError`; :meth:`assert_consumed` fails if steps were not played.
    Model-level retries default to 0 so that a scripted error is seen once.
    """

    type = "scripted"

    def __init__(
        self,
        steps: Sequence[Step] = (),
        *,
        model: str = "scripted-model",
        stream: bool = True,
        chunk_delay: float = 0.0,
        context_size: int = 32768,
        max_retries: int = 0,
        retry_delay: float = 1.0,
        record_requests: bool = True,
    ) -> None:
        super().__init__(
            model,
            stream=stream,
            context_size=context_size,
            max_retries=max_retries,
            retry_delay=retry_delay,
        )
        self._steps: list[Step] = list(steps)
        self.chunk_delay = chunk_delay
        self.record_requests = record_requests
        self.requests: list[ScriptedRequest] = []
        self._calls = 0

    @property
    def remaining(self) -> int:
        """Steps not played yet."""
        return len(self._steps)

    def add_steps(self, *steps: Step) -> None:
        """Append steps to the script."""
        self._steps.extend(steps)

    def assert_consumed(self) -> None:
        """Raise :class:`ScriptError` if steps were left unplayed."""
        if self._steps:
            raise ScriptError(f"{len(self._steps)} scripted step(s) were never played")

    async def _next_step(
        self,
        messages: list[Msg],
        tools: list[dict[str, Any]] | None,
        tool_choice: ToolChoice | None,
    ) -> list[ChatResponse] | ChatResponse:
        self._calls += 1
        if self.record_requests:
            request = ScriptedRequest(deep_copy(list(messages)), deep_copy(tools), tool_choice)
            self.requests.append(request)
        else:
            request = ScriptedRequest(list(messages), tools, tool_choice)
        if not self._steps:
            raise ScriptError(f"unexpected model call #{self._calls}: the script has no step left")
        step: Any = self._steps.pop(0)
        if callable(step) and not isinstance(step, ChatResponse):
            step = step(request)
            if inspect.isawaitable(step):
                step = await step
        if isinstance(step, BaseException):
            raise step
        if isinstance(step, ChatResponse):
            return step
        if isinstance(step, Sequence) and all(isinstance(c, ChatResponse) for c in step):
            return list(step)
        raise ScriptError(f"invalid scripted step: {step!r}")

    async def _pause(self) -> None:
        if self.chunk_delay:
            await trio.sleep(self.chunk_delay)
        else:
            await trio.lowlevel.checkpoint()

    async def _stream_api(
        self,
        messages: list[Msg],
        tools: list[dict[str, Any]] | None,
        tool_choice: ToolChoice | None,
        emit: ChunkSink,
    ) -> None:
        step = await self._next_step(messages, tools, tool_choice)
        # A whole response streams as one delta; scripted chunks stream as they are.
        chunks = [attrs.evolve(step, is_last=False)] if isinstance(step, ChatResponse) else step
        # The request: a provider's stream waits for its response before the first delta.
        await trio.lowlevel.checkpoint()
        for chunk in chunks:
            await self._pause()
            await emit(chunk)  # the accumulator never mutates the chunks it is given

    async def _call_api(
        self,
        messages: list[Msg],
        tools: list[dict[str, Any]] | None,
        tool_choice: ToolChoice | None,
    ) -> ChatResponse:
        step = await self._next_step(messages, tools, tool_choice)
        await self._pause()
        if isinstance(step, ChatResponse):
            return deep_copy(step)
        acc = StreamAccumulator()
        usage: ChatUsage | None = None
        for chunk in step:
            if chunk.is_last:
                return deep_copy(chunk)
            acc.add(deep_copy(chunk))
            usage = chunk.usage or usage
        return acc.build()


def text_chunks(
    *parts: str, block_id: str | None = None, usage: ChatUsage | None = None
) -> list[ChatResponse]:
    """Streamed text deltas of one block (``usage`` rides on the last chunk)."""
    block_id = block_id or generate_id()
    chunks = [ChatResponse(content=[TextBlock(id=block_id, text=p)], is_last=False) for p in parts]
    if usage is not None and chunks:
        chunks[-1].usage = usage
    return chunks


def thinking_chunks(*parts: str, block_id: str | None = None) -> list[ChatResponse]:
    """Streamed thinking deltas of one block."""
    block_id = block_id or generate_id()
    return [
        ChatResponse(content=[ThinkingBlock(id=block_id, thinking=p)], is_last=False) for p in parts
    ]


def tool_call_chunks(call_id: str, name: str, *fragments: str) -> list[ChatResponse]:
    """A tool call streamed as JSON argument fragments (at least one chunk)."""
    return [
        ChatResponse(content=[ToolCallBlock(id=call_id, name=name, input=f)], is_last=False)
        for f in (fragments or ("",))
    ]
