"""``ModelStream``: a model call pulled directly, ``async with model.stream(...) as chunks``.

The agent calls a model in push form (``await model(..., emit=...)``: the provider's stream
feeds the accumulator in the caller's task, no task switch per delta).  A user who calls a
model directly usually wants to pull::

    async with model.stream(messages, tools) as chunks:
        async for chunk in chunks:        # deltas (is_last=False), then the complete response
            print(chunk.content)
    chunks.response                       # the complete response, or the INTERRUPTED partial

Here the whole call (the provider stream, the accumulator, retries, the total deadline) runs
in a reader task of a nursery owned by the block, and chunks cross into the puller's task over
a bounded memory channel.  The reader never waits for the puller: when the channel is full,
the deltas the puller has not taken yet are coalesced into one pending chunk (text, thinking
and tool-call argument fragments of a block joined), which the puller gets on its next pull.
So the socket keeps draining, memory holds one chunk object per block however far the puller
lags, and concatenating every pulled delta per block still gives the full response.

Leaving the block before the stream ended, or cancelling it, cancels the reader: the call ends
with its INTERRUPTED partial response in :attr:`ModelStream.response` (as an interrupted agent
reply keeps its partial answer), and a cancellation propagates.  A provider error ends the
pull with that error, raised from the ``async with`` block.
"""

from __future__ import annotations

import contextlib
import types
from collections.abc import Awaitable, Callable
from typing import Self

import attrs
import trio

from .._core.concurrency import reraise_unwrapped
from .._core.json_types import JSONObject
from ..message import Msg, TextBlock, ThinkingBlock, ToolCallBlock
from ..types import FinishedReason, ToolChoice
from ._response import ChatResponse, ChatUsage, ResponseBlock

__all__ = ["ModelStream"]

#: Block types whose fragments concatenate (and so coalesce).
_Growing = TextBlock | ThinkingBlock | ToolCallBlock


def _fragment(block: _Growing) -> str:
    match block:
        case TextBlock():
            return block.text
        case ThinkingBlock():
            return block.thinking
        case ToolCallBlock():
            return block.input


class _Pending:
    """The deltas the puller has not taken yet, folded into one chunk.

    Fragments of a block id are kept in a list and joined once, when the puller takes them.
    """

    def __init__(self) -> None:
        self.blocks: list[ResponseBlock] = []
        self.parts: dict[str, tuple[int, list[str]]] = {}
        self.id = ""
        self.usage: ChatUsage | None = None
        self.metadata: JSONObject = {}
        self.finished_reason = FinishedReason.COMPLETED

    def add(self, chunk: ChatResponse) -> None:
        self.id = chunk.id
        self.usage = chunk.usage or self.usage
        self.metadata.update(chunk.metadata)
        if chunk.finished_reason != FinishedReason.COMPLETED:
            self.finished_reason = chunk.finished_reason
        for block in chunk.content:
            if isinstance(block, _Growing):
                grown = self.parts.get(block.id)
                if grown is not None and type(self.blocks[grown[0]]) is type(block):
                    index, parts = grown
                    parts.append(_fragment(block))
                    self.blocks[index] = _with_extras(self.blocks[index], block)
                    continue
                self.parts[block.id] = (len(self.blocks), [_fragment(block)])
            self.blocks.append(block)

    def take(self) -> ChatResponse:
        content = list(self.blocks)
        for index, parts in self.parts.values():
            if len(parts) > 1:
                content[index] = _grown(content[index], "".join(parts))
        return ChatResponse(
            content=content,
            is_last=False,
            id=self.id,
            usage=self.usage,
            finished_reason=self.finished_reason,
            metadata=self.metadata,
        )


def _with_extras(first: ResponseBlock, later: _Growing) -> ResponseBlock:
    """``first`` with what a later delta of its block adds besides a fragment, as the
    accumulator folds it: thinking extras (non-``None`` ones overwrite), a missing tool name."""
    if isinstance(first, ThinkingBlock) and isinstance(later, ThinkingBlock):
        extra = {k: v for k, v in later.extra.items() if v is not None}
        return attrs.evolve(first, extra={**first.extra, **extra}) if extra else first
    if isinstance(first, ToolCallBlock) and isinstance(later, ToolCallBlock):
        return attrs.evolve(first, name=later.name) if not first.name and later.name else first
    return first


def _grown(block: ResponseBlock, text: str) -> ResponseBlock:
    match block:
        case TextBlock():
            return attrs.evolve(block, text=text)
        case ThinkingBlock():
            return attrs.evolve(block, thinking=text)
        case ToolCallBlock():
            return attrs.evolve(block, input=text)
    return block  # pragma: no cover - only growing blocks have parts


class ModelStream:
    """``async with model.stream(messages, tools, tool_choice) as chunks:`` (see the module).

    ``chunks`` yields the deltas (``is_last=False``; coalesced when the puller lags), then the
    complete ``is_last=True`` response.  :attr:`response` is the call's end once it has one:
    the complete response, or the INTERRUPTED partial when the block was left early or
    cancelled.  ``buffer_size`` is the memory channel's: how many deltas may wait for the
    puller one by one before further ones coalesce.

    ``model`` is a chat model (:meth:`~trioagent.model.ChatModelBase.stream` builds this), or
    anything called like one: ``await model(messages, tools, tool_choice, emit=...)``.

    Written as a class, not ``@asynccontextmanager``: the library has no async generators.
    """

    def __init__(
        self,
        model: Callable[..., Awaitable[ChatResponse]],
        messages: list[Msg],
        tools: list[JSONObject] | None = None,
        tool_choice: ToolChoice | None = None,
        *,
        buffer_size: int = 16,
    ) -> None:
        if buffer_size < 0:
            raise ValueError("buffer_size must be >= 0")
        self._model = model
        self._args = (list(messages), tools, tool_choice)
        self._send, self._recv = trio.open_memory_channel[ChatResponse](buffer_size)
        self._pending: _Pending | None = None
        self._final: ChatResponse | None = None
        self._stack = contextlib.AsyncExitStack()
        self._nursery: trio.Nursery | None = None
        #: The call's end: the complete response, or the INTERRUPTED partial.
        self.response: ChatResponse | None = None

    # -- the block ---------------------------------------------------------------------------

    async def __aenter__(self) -> ModelStream:
        if self._nursery is not None:
            raise RuntimeError("a ModelStream can be entered once")
        self._nursery = await self._stack.enter_async_context(trio.open_nursery())
        self._nursery.start_soon(self._read)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: types.TracebackType | None,
    ) -> bool:
        assert self._nursery is not None
        self._recv.close()
        # Leaving the block ends the call: a reader still running is cancelled and records
        # the INTERRUPTED partial.
        self._nursery.cancel_scope.cancel()
        try:
            return bool(await self._stack.__aexit__(exc_type, exc, tb))
        except BaseExceptionGroup as group:
            reraise_unwrapped(group)

    # -- the reader task ---------------------------------------------------------------------

    async def _read(self) -> None:
        with self._send:
            final = await self._model(*self._args, emit=self._absorb)
            self._final = self.response = final

    async def _absorb(self, chunk: ChatResponse) -> None:
        """The call's emit: hand a delta over without waiting; coalesce when the puller lags."""
        if chunk.is_last:  # the INTERRUPTED partial of a cancelled call: the puller has gone
            self.response = chunk
            return
        if self._pending is None:
            try:
                self._send.send_nowait(chunk)
                return
            except trio.WouldBlock:
                self._pending = _Pending()
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return  # the puller left; the accumulator still has the delta
        self._pending.add(chunk)

    # -- the puller's side -------------------------------------------------------------------

    def receive_nowait(self) -> ChatResponse:
        """The next chunk, without waiting (``trio.WouldBlock`` if none is ready)."""
        try:
            return self._recv.receive_nowait()
        except trio.WouldBlock:
            if self._pending is None:
                raise
        except trio.EndOfChannel:
            if self._pending is None:
                if self._final is None:
                    raise
                final, self._final = self._final, None
                return final
        pending, self._pending = self._pending, None
        return pending.take()

    async def receive(self) -> ChatResponse:
        """The next chunk: a delta (coalesced if several waited), then the complete response;
        ``trio.EndOfChannel`` after it."""
        try:
            chunk = self.receive_nowait()
        except trio.WouldBlock:
            pass
        else:
            await trio.lowlevel.checkpoint()
            return chunk
        try:
            return await self._recv.receive()
        except trio.EndOfChannel:
            return self.receive_nowait()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> ChatResponse:
        try:
            return await self.receive()
        except trio.EndOfChannel:
            raise StopAsyncIteration from None
