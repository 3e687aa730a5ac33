"""Background tools supervised by ``async with agent:``.

A call moves to the agent's supervision nursery when its tool says so (``is_background``), or
when it is still running after ``background_after`` seconds.  The model gets a "running in
background" result at once; the real result is delivered as a hint on the next reasoning step
(or whenever the caller asks via :meth:`Supervisor.wait_result`).  Leaving ``async with agent:`` cancels the tasks, and
each records exactly one interrupted result.
"""

from __future__ import annotations

import contextlib
import copy
import enum
import math
from collections.abc import Awaitable, Callable
from typing import TypeAlias

import trio

from .._core.concurrency import is_cancellation, reraise_unwrapped, unwrap_group
from .._core.emit import Emit
from ..event import AgentEvent, HintBlockEvent
from ..exception import DeveloperOrientedException
from ..message import HintBlock, TextBlock, ToolCallBlock, ToolResultState
from ..model import ChatModelBase, close_owned_model
from ..tool import ToolBase, ToolChunk, ToolResponse
from ._state import AgentState

__all__ = [
    "INTERRUPTED_TEXT",
    "BackgroundStatus",
    "BackgroundToolError",
    "BackgroundToolHandle",
    "Supervisor",
    "wants_background",
]

INTERRUPTED_TEXT = (
    "<system-reminder>The tool call has been interrupted by the user.</system-reminder>"
)

#: What the ``on_acting`` chain passes on: chunks, then one final response.
ActingItem: TypeAlias = ToolChunk | ToolResponse
Sink: TypeAlias = Emit[ActingItem]
#: Runs a call's ``on_acting`` chain with the given sink.
ActingRun: TypeAlias = Callable[[ToolCallBlock, Sink], Awaitable[None]]


class BackgroundToolError(DeveloperOrientedException):
    """A background tool was requested outside ``async with agent:``."""


class BackgroundStatus(enum.StrEnum):
    RUNNING = "running"
    SUCCESS = "success"
    ERROR = "error"
    INTERRUPTED = "interrupted"


class BackgroundToolHandle:
    """A tool call running in the agent's supervision nursery.

    ``status`` is running until the task ends; ``result`` is then its final
    :class:`~trioagent.tool.ToolResponse` (interrupted when cancelled).  ``cancel()`` stops
    it; ``await wait()`` returns the result.
    """

    def __init__(self, call_id: str, tool_name: str) -> None:
        self.call_id = call_id
        self.tool_name = tool_name
        self.result: ToolResponse | None = None
        self.delivered = False
        self._scope = trio.CancelScope()
        self._done = trio.Event()

    def __repr__(self) -> str:
        return f"<BackgroundToolHandle {self.tool_name} id={self.call_id} {self.status}>"

    @property
    def status(self) -> BackgroundStatus:
        if self.result is None:
            return BackgroundStatus.RUNNING
        return BackgroundStatus(self.result.state)

    def cancel(self) -> None:
        """Cancel the task; it records an interrupted result."""
        self._scope.cancel()

    async def wait(self) -> ToolResponse:
        """Wait for the task to end and return its result."""
        await self._done.wait()
        assert self.result is not None
        return self.result

    def _finish(self, result: ToolResponse) -> bool:
        """Record the result once; returns whether this call recorded it."""
        if self.result is not None:
            return False
        self.result = result
        self._done.set()
        return True


class Supervisor:
    """The agent's supervision scope: a nursery for background tools and their results.

    ``owned_model`` is a model the agent built from a spec string: closing the scope closes it.
    """

    def __init__(self, owned_model: ChatModelBase | None = None) -> None:
        self._owned_model = owned_model
        self._stack: contextlib.AsyncExitStack | None = None
        self._nursery: trio.Nursery | None = None
        self.handles: dict[str, BackgroundToolHandle] = {}
        self._pending: list[BackgroundToolHandle] = []
        self._arrived = trio.Event()

    async def open(self) -> None:
        if self._stack is not None:
            raise RuntimeError("async with agent: is already open")
        stack = contextlib.AsyncExitStack()
        self._nursery = await stack.enter_async_context(trio.open_nursery())
        self._stack = stack

    async def close(self, exc: BaseException | None) -> None:
        stack, nursery = self._stack, self._nursery
        if stack is None or nursery is None:
            return
        self._stack = self._nursery = None
        nursery.cancel_scope.cancel()
        try:
            await stack.__aexit__(
                type(exc) if exc else None, exc, exc.__traceback__ if exc else None
            )
        except BaseExceptionGroup as group:
            # The nursery wraps what the `async with agent:` body raised (a Cancelled, a
            # ValueError from reply()) in a group; hand the caller the plain exception.
            reraise_unwrapped(group)
        finally:
            if self._owned_model is not None:
                await close_owned_model(self._owned_model)

    def start_soon(self, fn: Callable[..., Awaitable[object]], *args: object) -> bool:
        """Run ``fn(*args)`` as a task of the supervision nursery; ``False`` when it is closed."""
        if self._nursery is None:
            return False
        self._nursery.start_soon(fn, *args)
        return True

    async def start(
        self, call: ToolCallBlock, body: Callable[[Sink], Awaitable[None]]
    ) -> BackgroundToolHandle:
        """Start ``body(sink)`` (the ``on_acting`` chain) in the supervision nursery."""
        if self._nursery is None:
            raise BackgroundToolError(
                f"tool {call.name!r} wants to run in the background, which needs the agent's "
                "supervision scope: run the reply inside `async with agent:`"
            )
        handle = BackgroundToolHandle(call.id, call.name)
        self.handles[call.id] = handle
        try:
            await self._nursery.start(self._supervise, handle, body)
        except BaseException:
            # Cancelled while starting (the task may already run): the caller records the
            # call's interrupted result, so the task must stop and never report.
            handle.cancel()
            self.delivered_in_foreground(handle)
            raise
        return handle

    async def _supervise(
        self,
        handle: BackgroundToolHandle,
        body: Callable[[Sink], Awaitable[None]],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        collected = ToolResponse(id=handle.call_id)
        final: ToolResponse | None = None

        async def sink(item: ActingItem) -> None:
            nonlocal final
            if isinstance(item, ToolResponse):
                final = item
            elif isinstance(item, ToolChunk):
                collected.append_chunk(item)

        try:
            with handle._scope:
                task_status.started()
                try:
                    await body(sink)
                except BaseException as exc:
                    failure, cancellations = _split_failure(exc)
                    if failure is None:
                        raise
                    final = ToolResponse(
                        id=handle.call_id,
                        state=ToolResultState.ERROR,
                        content=[TextBlock(text=f"{type(failure).__name__}: {failure}")],
                    )
                    if cancellations is not None:
                        raise cancellations from None
        finally:
            if final is None:
                final = ToolResponse(
                    id=handle.call_id,
                    state=ToolResultState.INTERRUPTED,
                    content=[TextBlock(text=INTERRUPTED_TEXT)],
                )
            if handle._finish(final) and not handle.delivered:
                self._pending.append(handle)
                # Wake every current waiter; later ones wait on a fresh event.
                arrived, self._arrived = self._arrived, trio.Event()
                arrived.set()

    async def wait_result(self) -> None:
        """Wait until a background result is waiting to be delivered to the model."""
        while not self._pending:
            await self._arrived.wait()

    def take_results(self) -> list[BackgroundToolHandle]:
        """The finished handles not yet delivered to the model, oldest first."""
        done, self._pending = self._pending, []
        for handle in done:
            handle.delivered = True
        return done

    def delivered_in_foreground(self, handle: BackgroundToolHandle) -> None:
        """The call finished before its hand-off: its result went to the reply directly."""
        handle.delivered = True
        self.handles.pop(handle.call_id, None)
        if handle in self._pending:
            self._pending.remove(handle)

    async def run_in_background(
        self, call: ToolCallBlock, tool: ToolBase | None, acting: ActingRun, sink: Sink
    ) -> None:
        """Run ``call``'s ``on_acting`` chain under the supervisor; report to ``sink``.

        With ``background_after`` the call stays in the foreground (its chunks stream to ``sink``)
        until that many seconds pass, then moves to the background.  Either way ``sink`` receives
        exactly one :class:`ToolResponse`: the real one, or the "running in background" placeholder.
        """
        after = None if tool is None or tool.is_background else tool.background_after
        send, recv = trio.open_memory_channel[ActingItem](math.inf)
        handed_off = False

        async def body(task_sink: Sink) -> None:
            async def forward(item: ActingItem) -> None:
                await task_sink(item)
                if not handed_off:
                    send.send_nowait(item)

            with send:
                await acting(call, forward)

        handle = await self.start(call, body)
        try:
            if after is None:
                handed_off = True
                recv.close()
            else:
                deadline = trio.current_time() + after
                while True:
                    # Only the wait for the next item is timed: a timer must never cancel the
                    # delivery of an item to the reply (that could drop an event mid-way).
                    with trio.move_on_at(deadline) as window:
                        try:
                            item = await recv.receive()
                        except trio.EndOfChannel:
                            item = None
                    if window.cancelled_caught:
                        break
                    if item is None:
                        # The task ended without a response (it failed or was cancelled).
                        result = await handle.wait()
                        self.delivered_in_foreground(handle)
                        await sink(result)
                        return
                    await sink(item)
                    if isinstance(item, ToolResponse):
                        self.delivered_in_foreground(handle)
                        return
                recv.close()
                handed_off = True
            await _send_placeholder(sink, call, after)
        except BaseException:
            # The reply was cancelled (or failed) before the model got the placeholder: the reply
            # records the call's interrupted result itself, so stop the task too, and never
            # deliver its result again as a background hint.
            handle.cancel()
            self.delivered_in_foreground(handle)
            raise
        finally:
            recv.close()

    async def deliver_results(self, state: AgentState, name: str, emit: Emit[AgentEvent]) -> None:
        """Append finished background results as hints to the reply (before a reasoning step).

        Every hint is in the context before the first event is emitted, so a cancellation while
        a consumer handles one event loses none of the others.
        """
        hints: list[HintBlock] = []
        for handle in self.take_results():
            assert handle.result is not None
            text = handle.result.text() if hasattr(handle.result, "text") else ""
            status = handle.status.value
            body = (
                f"<system-notification>Tool '{handle.tool_name}' running in background "
                f"(id={handle.call_id}) has {'completed' if status == 'success' else status}."
                f"\n\nResult:\n\n{text or '(no output)'}</system-notification>"
            )
            hint = HintBlock(
                hint=[TextBlock(text=body)],
                source=f'{{"label": "tool_output", "sublabel": "{handle.tool_name} · {handle.call_id}"}}',
            )
            state.append_context(name, [hint])
            hints.append(hint)
        for hint in hints:
            await emit(
                HintBlockEvent(
                    reply_id=state.reply_id, block_id=hint.id, source=hint.source, hint=hint.hint
                )
            )


def _split_failure(
    exc: BaseException,
) -> tuple[Exception | None, BaseExceptionGroup[BaseException] | None]:
    """(the tool's failure, the cancellations raised with it) -- ``(None, None)`` when ``exc``
    is only a cancellation or holds anything else that must propagate (KeyboardInterrupt).

    A cancelled tool whose cleanup fails raises a group of ``Cancelled`` and that error: the
    error becomes the tool's result, the cancellations keep propagating.
    """
    if isinstance(exc, Exception):
        return exc, None
    if not isinstance(exc, BaseExceptionGroup):
        return None, None
    errors, rest = exc.split(Exception)
    if errors is None or (rest is not None and not is_cancellation(rest)):
        return None, None
    failure = unwrap_group(errors)
    assert isinstance(failure, Exception)  # split(Exception) keeps Exceptions only
    return failure, rest


def wants_background(tool: ToolBase) -> bool:
    """Whether calls of ``tool`` go through the supervisor (never for state-injected or external
    tools, whose results must be written in the reply)."""
    if tool.is_state_injected or tool.is_external_tool:
        return False
    return bool(tool.is_background) or tool.background_after is not None


def placeholder(call: ToolCallBlock, after: float | None) -> ToolResponse:
    when = f" for over {after:g}s" if after else ""
    text = (
        f"<system-reminder>Tool '{call.name}' is running in background (id={call.id}){when}. "
        "You will be notified automatically when it finishes, so **DO NOT** poll for it. You "
        "may continue with other work, or reply with text only to end this turn."
        "</system-reminder>"
    )
    return ToolResponse(
        id=call.id,
        content=[TextBlock(text=text)],
        metadata={"background": {"id": call.id, "status": "running"}},
    )


async def _send_placeholder(sink: Sink, call: ToolCallBlock, after: float | None) -> None:
    response = placeholder(call, after)
    # As a chunk first, so the event stream shows the text the model reads (as the
    # offload middleware of AgentScope does: a chunk, then the response).
    chunk = ToolChunk(
        content=copy.deepcopy(response.content),
        state=response.state,
        metadata=dict(response.metadata),
    )
    await sink(chunk)
    await sink(response)
