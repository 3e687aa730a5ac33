"""The ReAct agent: reply loop, interruption and the exactly-once end event (DESIGN.md §4)."""

from __future__ import annotations

import copy
import fnmatch
import functools
import logging
import types
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import trio

from .._core.chain import Chain, Layer, returning_layer
from .._core.concurrency import is_cancellation
from .._core.emit import Emit
from ..event import (
    AgentEvent,
    EventBase,
    ExceedMaxItersEvent,
    ExternalExecutionResultEvent,
    ModelCallEndEvent,
    ModelCallStartEvent,
    ReplyEndEvent,
    ReplyStartEvent,
    UserConfirmResultEvent,
    UserInterruptEvent,
)
from ..exception import ReplyInterruptedError, error_info
from ..message import (
    AssistantMsg,
    DataBlock,
    HintBlock,
    Msg,
    SystemMsg,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    URLSource,
    Usage,
    UserMsg,
)
from ..middleware import MiddlewareBase
from ..model._response import ChatResponse
from ..permission import PermissionEngine
from ..tool import Toolkit
from ..types import FinishedReason, ReplyFinishedReason, ToolChoice, generate_id
from . import _acting, _background, _compress, _injection, _structured
from ._config import ContextConfig, InjectionConfig, ModelConfig, ReActConfig
from ._convert import ChunkConverter
from ._run import ReplyRun, StopReply
from ._state import AgentState, ReplyContext

if TYPE_CHECKING:
    from ..model import ChatModelBase
    from ._stream import ReplyStream

__all__ = ["Agent"]

logger = logging.getLogger("trioagent.agent")

PARKED_TEXT = "I'm waiting for your permission or the external execution to finish."
STRUCTURED_DONE_TEXT = "The required structured output is generated."
EXCEEDED_TEXT = "The maximum reasoning-acting iterations are exceeded."
INTERRUPTED_TOOL_TEXT = (
    "<system-reminder>The tool call has been interrupted by the user.</system-reminder>"
)
STRUCTURED_HINT_SOURCE = '{"label": "System", "sublabel": "Structured Output Requirement"}'
MAX_ITERS_HINT_SOURCE = '{"label": "System", "sublabel": "Max Iterations Reached"}'

ReplyInputs = (
    Msg
    | Sequence[Msg]
    | UserConfirmResultEvent
    | ExternalExecutionResultEvent
    | UserInterruptEvent
    | None
)


@attrs.frozen
class _Exit:
    events: list[EventBase] | None
    msg: Msg


@attrs.frozen
class _Reasoning:
    hint: HintBlock | None = None
    tool_choice: ToolChoice | None = None


@attrs.frozen
class _Acting:
    calls: list[ToolCallBlock]


class Agent:
    """A ReAct agent whose every step can be intercepted by middleware.

    Args:
        name: the agent's name (also the ``name`` of its messages).
        system_prompt: the base system prompt (``on_system_prompt`` middlewares transform it).
        model: the chat model; ``agent.model`` may be swapped between calls.
        toolkit: the tools the model may call (an empty :class:`~trioagent.tool.Toolkit` by
            default).
        middlewares: the first one is the outermost layer of every hook it implements.
        state: a restored :class:`AgentState` (a fresh one by default).

    Replies::

        msg = await agent.reply(UserMsg("user", "hi"))      # or: await agent(msg)
        async with agent.stream(UserMsg("user", "hi")) as reply:
            async for event in reply:
                ...
        agent.interrupt()                                   # from any task

    A reply always ends with exactly one ``ReplyEndEvent`` (DESIGN.md §4): ``interrupt()``
    makes ``reply()`` return the interrupted Msg; an outer cancellation emits the same
    INTERRUPTED end and then propagates; an error emits an ERROR end and then propagates.
    """

    def __init__(
        self,
        name: str,
        system_prompt: str = "",
        model: ChatModelBase | None = None,
        toolkit: Toolkit | None = None,
        middlewares: Sequence[MiddlewareBase] | None = None,
        state: AgentState | None = None,
        model_config: ModelConfig | None = None,
        context_config: ContextConfig | None = None,
        react_config: ReActConfig | None = None,
        injection_config: InjectionConfig | None = None,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError("Agent name must be a non-empty string")
        if model is None:
            raise TypeError("Agent needs a chat model (model=...)")
        self.name = name
        self.system_prompt = system_prompt
        self.model = model
        self.toolkit = toolkit if toolkit is not None else Toolkit()
        self.state = state if state is not None else AgentState()
        self.model_config = model_config if model_config is not None else ModelConfig()
        self.context_config = context_config if context_config is not None else ContextConfig()
        self.react_config = react_config if react_config is not None else ReActConfig()
        self.injection_config = (
            injection_config if injection_config is not None else InjectionConfig()
        )
        buffer = self.injection_config.context_buffer_ratio
        if buffer is not None:
            self.context_config.context_buffer_ratio = buffer
        if (
            self.injection_config.inject_runtime_state
            or self.context_config.compression_tool_enabled
        ) and self.context_config.context_buffer_ratio >= self.context_config.trigger_ratio:
            raise ValueError(
                "context_buffer_ratio must be smaller than trigger_ratio when runtime-state "
                "injection or the compression tool is enabled"
            )
        self.permission_engine = PermissionEngine(self.state.permission_context)
        self.middlewares: tuple[MiddlewareBase, ...] = tuple(middlewares or ())
        for mw in self.middlewares:
            if not isinstance(mw, MiddlewareBase):
                raise TypeError(f"middlewares must be MiddlewareBase instances, got {mw!r}")

        def implementing(hook: str) -> list[Any]:
            return [getattr(mw, hook) for mw in self.middlewares if mw.is_implemented(hook)]

        def streaming(hook: str) -> list[Layer]:
            return [functools.partial(h, self) for h in implementing(hook)]

        def awaitable(hook: str) -> list[Layer]:
            return [returning_layer(functools.partial(h, self)) for h in implementing(hook)]

        self._reply_chain: Chain = Chain(streaming("on_reply"), self._reply_core)
        self._reasoning_chain: Chain = Chain(streaming("on_reasoning"), self._reasoning_core)
        self._acting_chain: Chain = Chain(streaming("on_acting"), self._acting_core)
        self._model_call_chain: Chain = Chain(streaming("on_model_call"), self._model_call_core)
        self._permission_hooks = implementing("on_check_permission")
        self._permission_chain: Chain = Chain(
            awaitable("on_check_permission"), self._check_permission_core
        )
        self._compress_chain: Chain = Chain(awaitable("on_compress_context"), self._compress_core)
        self._system_prompt_hooks = implementing("on_system_prompt")
        self._run: ReplyRun | None = None
        self._supervisor = _acting.Supervisor(self)
        self._compress_tool: Any = None

    def __repr__(self) -> str:
        return f"<Agent {self.name!r} model={getattr(self.model, 'model', self.model)!r}>"

    # -- public API -----------------------------------------------------------------------------

    async def __call__(self, inputs: ReplyInputs = None, *, structured_schema: Any = None) -> Msg:
        """Same as :meth:`reply`."""
        return await self.reply(inputs, structured_schema=structured_schema)

    async def reply(
        self,
        inputs: ReplyInputs = None,
        *,
        structured_schema: Any = None,
        on_event: Callable[[AgentEvent], Awaitable[None]] | None = None,
    ) -> Msg:
        """Run one reply (or resume a parked one) and return its final Msg.

        ``on_event``, when given, is awaited with every event in the reply's own task (the
        callback form of :meth:`stream`: no channel, and it still receives the INTERRUPTED end
        during an outer cancellation).

        Raises:
            RuntimeError: no final message was produced (a ``UserInterruptEvent`` with nothing
                parked), or this agent is already replying.
            ReplyInterruptedError: after ``interrupt()``, when
                ``react_config.interruption_raise_cancelled_error`` is set.
        """
        consumer = None
        if on_event is not None:

            async def consumer(item: Any) -> None:
                if not isinstance(item, Msg):
                    await on_event(item)

        run = await self._run_reply(inputs, structured_schema, consumer)
        return self._final_msg(run)

    def stream(self, inputs: ReplyInputs = None, *, structured_schema: Any = None) -> ReplyStream:
        """Run one reply in a background task and stream its events; see :class:`ReplyStream`."""
        from ._stream import ReplyStream

        return ReplyStream(self, inputs, structured_schema)

    def interrupt(self) -> None:
        """Cancel the running reply, if any (synchronous, idempotent, callable from any task).

        The reply closes its open blocks, writes an interrupted result for every unfinished tool
        call, emits ``ReplyEndEvent(INTERRUPTED)`` and ``reply()`` returns the interrupted Msg.
        """
        if self._run is not None:
            self._run.scope.cancel()

    @property
    def is_replying(self) -> bool:
        """Whether a reply is running now."""
        return self._run is not None

    @property
    def background_tasks(self) -> Mapping[str, _background.BackgroundToolHandle]:
        """The background tool calls of this agent by call id (a read-only live view).

        Each :class:`~trioagent.agent.BackgroundToolHandle` has ``status``, ``result``,
        ``cancel()`` and ``await wait()``.  Calls that finished within their
        ``background_after`` window never appear here.
        """
        return types.MappingProxyType(self._supervisor.handles)

    def start_soon_supervised(self, fn: Callable[..., Awaitable[object]], *args: object) -> bool:
        """Run ``fn(*args)`` in the supervision scope of ``async with agent:``.

        For middleware work that may outlive a reply (a memory write, say): it is cancelled when
        the scope closes, like a background tool.  Returns ``False`` and starts nothing when the
        scope is not open, so the caller can await the work itself instead.
        """
        return self._supervisor.start_soon(fn, *args)

    async def observe(self, msgs: Msg | Sequence[Msg] | None) -> None:
        """Append messages to the context without replying (validated deep copies).

        Raises:
            ValueError: the agent is parked (calls await a confirmation or an external
                result): a message appended now would orphan them, as ``reply(new Msg)`` would
                (reference/agent.md §5.3).  Resume or abort the reply first.
        """
        if msgs is None:
            return
        if self.state.has_awaiting_tool_calls(self.name):
            raise ValueError(
                "Agent is parked: tool calls await a confirmation or an external result. "
                "Resume it (UserConfirmResultEvent / ExternalExecutionResultEvent) or abort it "
                "(UserInterruptEvent) before observing new messages."
            )
        self._handle_incoming_messages([msgs] if isinstance(msgs, Msg) else list(msgs))

    async def compress_context(
        self, context_config: ContextConfig | None = None, instructions: str | None = None
    ) -> None:
        """Run the ``on_compress_context`` chain around the compression check (§8.2)."""
        await self._compress_chain.result(
            {"context_config": context_config, "instructions": instructions}
        )

    async def __aenter__(self) -> Agent:
        """Open the supervision scope that owns background tool tasks."""
        await self._supervisor.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: types.TracebackType | None,
    ) -> None:
        """Cancel background tools still running; each records an interrupted result.

        Like leaving any nursery, this waits until every task has finished: a tool that
        shields itself from cancellation holds the block open until it returns.
        """
        await self._supervisor.close(exc)

    # -- the run and its exactly-once end ---------------------------------------------------------

    def _final_msg(self, run: ReplyRun) -> Msg:
        msg = run.final_msg
        if msg is None:
            raise RuntimeError("Agent did not produce a final message.")
        if (
            msg.finished_reason == ReplyFinishedReason.INTERRUPTED
            and run.scope.cancelled_caught
            and self.react_config.interruption_raise_cancelled_error
        ):
            raise ReplyInterruptedError(msg)
        return msg

    async def _run_reply(
        self,
        inputs: ReplyInputs,
        structured_schema: Any,
        consumer: Any,
        on_registered: Callable[[], object] | None = None,
    ) -> ReplyRun:
        if self._run is not None:
            raise RuntimeError(f"agent {self.name!r} is already replying; one reply at a time")
        run = ReplyRun(consumer)
        self._run = run
        if on_registered is not None:
            # From here on interrupt() reaches this run (ReplyStream waits for this point).
            on_registered()
        kwargs = {"inputs": inputs, "structured_schema": structured_schema}
        outcome: ReplyFinishedReason | None = None
        error: BaseException | None = None
        try:
            with run.scope:
                try:
                    await self._reply_chain.run(kwargs, run.deliver, run)
                except BaseException as exc:
                    if is_cancellation(exc):
                        outcome = ReplyFinishedReason.INTERRUPTED
                    else:
                        outcome, error = ReplyFinishedReason.ERROR, exc
                    raise
        finally:
            try:
                if run.started and not run.parked and run.end is None:
                    # The end never reached the consumer (a middleware dropped an INTERRUPTED or
                    # ERROR end, or a layer died on the way out): deliver it directly.
                    with trio.CancelScope(shield=True) as cleanup:
                        # Shielded so the end is delivered during a cancellation; bounded by
                        # react_config.interrupt_grace.
                        cleanup.deadline = trio.current_time() + self.react_config.interrupt_grace
                        reason = outcome or run.outcome or ReplyFinishedReason.INTERRUPTED
                        await run.deliver(self._end_event(run, reason, error))
                        await run.deliver(self._closing_msg(reason, error))
                elif run.end is not None and run.final_msg is None and run.exit_msg is not None:
                    # interrupt() landed while the end was on its way to the consumer (e.g. a
                    # "stop" click racing the end): the reply did end as that event says, so
                    # the caller gets the Msg that goes with it.
                    run.final_msg = run.exit_msg
                elif run.final_msg is None and not run.started and run.scope.cancelled_caught:
                    # interrupt() landed before the reply started (e.g. during an on_reply
                    # middleware's pre-logic): nothing was emitted, but the caller asked for an
                    # interruption, so it gets the interrupted Msg, not "no final message".
                    msg = self._closing_msg(ReplyFinishedReason.INTERRUPTED, None)
                    msg.id = run.reply_id or generate_id()
                    await run.deliver(msg)
            finally:
                self._run = None
        return run

    def _end_event(
        self, run: ReplyRun, reason: ReplyFinishedReason, error: BaseException | None
    ) -> ReplyEndEvent:
        return ReplyEndEvent(
            session_id=self.state.session_id,
            reply_id=run.reply_id or self.state.reply_id,
            finished_reason=reason,
            error=error_info(error) if error is not None else None,
        )

    def _closing_msg(self, reason: ReplyFinishedReason, error: BaseException | None) -> Msg:
        """The final Msg of an interrupted or failed reply (never written to the context)."""
        msg = self._final(self.react_config.interruption_message, reason)
        if error is not None:
            msg.error = error_info(error)
            msg.content = [TextBlock(text=f"The reply failed: {msg.error.message}")]
        return msg

    # -- on_reply core ----------------------------------------------------------------------------

    async def _reply_core(self, kwargs: dict[str, Any], emit: Emit) -> None:
        run = self._run
        assert run is not None
        try:
            await self._reply_body(kwargs, emit, run)
        except StopReply:
            if run.started and run.end is None:
                await self._finish_abnormally(emit, run, ReplyFinishedReason.INTERRUPTED, None)
        except BaseException as exc:
            if run.started and run.end is None:
                # A cancellation caused by an outer layer's failure ends the reply with ERROR.
                failure = run.failure if is_cancellation(exc) else exc
                if failure is None:
                    await self._finish_abnormally(emit, run, ReplyFinishedReason.INTERRUPTED, None)
                else:
                    await self._finish_abnormally(emit, run, ReplyFinishedReason.ERROR, failure)
            raise

    async def _finish_abnormally(
        self,
        emit: Emit,
        run: ReplyRun,
        reason: ReplyFinishedReason,
        error: BaseException | None,
    ) -> None:
        """Close unfinished tool calls, then emit the end event and the final Msg."""
        with trio.CancelScope(shield=True) as cleanup:
            # Shielded so the cleanup runs inside a cancelled scope; bounded by
            # react_config.interrupt_grace.
            cleanup.deadline = trio.current_time() + self.react_config.interrupt_grace
            await _acting.close_unfinished_tool_calls(self, emit, error)
            run.outcome = reason
            await emit(self._end_event(run, reason, error))
            await emit(self._closing_msg(reason, error))

    async def _reply_body(self, kwargs: dict[str, Any], emit: Emit, run: ReplyRun) -> None:
        inputs = kwargs.get("inputs")
        schema = kwargs.get("structured_schema")
        event, msgs = _classify_inputs(inputs)
        run.session_id = self.state.session_id
        if isinstance(event, UserInterruptEvent):
            if self.state.has_awaiting_tool_calls(self.name):
                run.started = True
                run.reply_id = self.state.reply_id
                raise StopReply
            return
        resuming = await _acting.check_incoming_event(self, event)
        if resuming:
            assert event is not None
            if schema is not None:
                logger.warning(
                    "structured_schema is ignored when resuming a parked reply; "
                    "the parked reply's schema is used"
                )
            run.started = True
            run.reply_id = self.state.reply_id
            await _acting.handle_incoming_event(self, event, emit)
        else:
            _acting.close_calls_left_by_a_snapshot(self)
            self._handle_incoming_messages(msgs)
            self.state.reply_context = ReplyContext(structured_schema=schema)
            run.reply_id = self.state.reply_id
            run.started = True
            await emit(
                ReplyStartEvent(
                    session_id=self.state.session_id, reply_id=run.reply_id, name=self.name
                )
            )
        _structured.mount(self)
        await self._loop(emit, run)

    async def _loop(self, emit: Emit, run: ReplyRun) -> None:
        final_msg: Msg | None = None
        made_progress = True
        while True:
            action = self._next_action(final_msg)
            if isinstance(action, _Exit):
                if action.events is None:
                    run.parked = True
                    await emit(action.msg)
                    return
                run.exit_msg = action.msg
                for event in action.events:
                    if isinstance(event, ReplyEndEvent):
                        run.outcome = event.finished_reason
                    await emit(event)
                if run.end is not None:
                    await emit(action.msg)
                    return
                if not made_progress:
                    raise RuntimeError(
                        "A middleware swallowed the ReplyEndEvent twice without any "
                        "reasoning/acting in between; the reply cannot make progress."
                    )
                made_progress = False
                final_msg = None
                continue
            made_progress = True
            if isinstance(action, _Reasoning):
                final_msg = None
                if action.hint is not None:
                    self.state.append_context(self.name, [action.hint])
                await _background.deliver_results(self, emit)
                await self.compress_context()
                await _injection.inject_runtime_state(self, emit)
                final_msg = await self._reasoning(action.tool_choice, emit)
            else:
                await _acting.act(self, action.calls, emit)
            if not self.state.get_unfinished_tool_calls(self.name):
                self.state.cur_iter += 1

    def _next_action(self, final_msg: Msg | None) -> _Exit | _Reasoning | _Acting:
        """Decide the next step (reference/agent.md §3.2); pure apart from reading the state."""
        state = self.state
        cfg = self.react_config
        awaiting = state.get_awaiting_tool_calls(self.name)
        last = state._reply_message(self.name)
        if last is not None:
            answered = {b.id for b in last.content if isinstance(b, ToolResultBlock)}
            executable = [
                b
                for b in last.content
                if isinstance(b, ToolCallBlock)
                and b.id not in answered
                and (b.state == "allowed" or (b.state == "pending" and not awaiting))
            ]
            if executable:
                return _Acting(executable)
        if awaiting:
            return _Exit(None, AssistantMsg(self.name, PARKED_TEXT, id=state.reply_id))
        reply_id = state.reply_id
        schema = state.reply_context.structured_schema
        if schema is not None:
            output = state.reply_context.structured_output
            if output is not None:
                return _Exit(
                    [self._reply_end(ReplyFinishedReason.COMPLETED)],
                    self._final(
                        STRUCTURED_DONE_TEXT,
                        ReplyFinishedReason.COMPLETED,
                        structured_output=copy.deepcopy(output),
                    ),
                )
            if state.cur_iter >= cfg.max_iters + cfg.structured_output_grace_iters:
                return self._exceeded_exit()
            forced = state.cur_iter >= cfg.max_iters
            suffix = (
                "You have reached the maximum reasoning-acting iterations, so call this tool at "
                "once to generate the final structured output."
                if forced
                else "Call it when you are ready to generate the final structured output."
            )
            hint = HintBlock(
                hint=[
                    TextBlock(
                        text="<system-reminder>You're required to generate structured output by "
                        f"calling the '{_structured.TOOL_NAME}' tool. {suffix}</system-reminder>"
                    )
                ],
                source=STRUCTURED_HINT_SOURCE,
            )
            return _Reasoning(hint, ToolChoice(mode=_structured.TOOL_NAME) if forced else None)
        if final_msg is not None:
            exceeded = state.cur_iter > cfg.max_iters
            reason = (
                ReplyFinishedReason.EXCEED_MAX_ITERS if exceeded else ReplyFinishedReason.COMPLETED
            )
            events: list[EventBase] = []
            if exceeded:
                events.append(ExceedMaxItersEvent(reply_id=reply_id, name=self.name))
            events.append(self._reply_end(reason))
            final_msg.finished_reason = reason
            return _Exit(events, final_msg)
        if state.cur_iter == cfg.max_iters:
            return _Reasoning(
                HintBlock(
                    hint=f"<system-reminder>You have reached the maximum of {cfg.max_iters} "
                    "reasoning-acting iterations. Summarize the work and findings so far and "
                    "return the final answer as text. Do not call any tools.</system-reminder>",
                    source=MAX_ITERS_HINT_SOURCE,
                ),
                ToolChoice(mode="none"),
            )
        if state.cur_iter > cfg.max_iters:
            return self._exceeded_exit()
        return _Reasoning()

    def _exceeded_exit(self) -> _Exit:
        return _Exit(
            [
                ExceedMaxItersEvent(reply_id=self.state.reply_id, name=self.name),
                self._reply_end(ReplyFinishedReason.EXCEED_MAX_ITERS),
            ],
            self._final(EXCEEDED_TEXT, ReplyFinishedReason.EXCEED_MAX_ITERS),
        )

    def _reply_end(self, reason: ReplyFinishedReason) -> ReplyEndEvent:
        return ReplyEndEvent(
            session_id=self.state.session_id, reply_id=self.state.reply_id, finished_reason=reason
        )

    def _final(
        self,
        text: str,
        reason: ReplyFinishedReason,
        structured_output: dict[str, Any] | None = None,
    ) -> Msg:
        return AssistantMsg(
            self.name,
            text,
            id=self.state.reply_id,
            finished_reason=reason,
            finished_at=_now(),
            structured_output=structured_output,
            usage=self._reply_usage(),
        )

    def _reply_usage(self) -> Usage | None:
        last = self.state._reply_message(self.name)
        if last is None or last.id != self.state.reply_id or last.usage is None:
            return None
        return attrs.evolve(last.usage)

    # -- inputs ---------------------------------------------------------------------------------

    def _handle_incoming_messages(self, msgs: Sequence[Msg]) -> None:
        """Validate, deep-copy and append incoming messages (reference/agent.md §3.1)."""
        patterns = getattr(
            getattr(self.model, "formatter", None), "supported_input_media_types", None
        )
        for msg in msgs:
            if not isinstance(msg, Msg):
                raise ValueError(f"expected a Msg, got {type(msg).__name__}")
            if msg.role == "system":
                raise ValueError("system messages cannot be passed to an agent; use system_prompt")
            for block in msg.content:
                if isinstance(block, ToolCallBlock | ToolResultBlock | ThinkingBlock):
                    raise ValueError(
                        f"incoming messages cannot hold {block.type!r} blocks (message {msg.id})"
                    )
            copied = copy.deepcopy(msg)
            if patterns is not None:
                copied.content = [_convert_unsupported(b, patterns) for b in copied.content]
            self.state.context.append(copied)

    # -- reasoning --------------------------------------------------------------------------------

    async def _reasoning(self, tool_choice: ToolChoice | None, emit: Emit) -> Msg | None:
        """Run the ``on_reasoning`` chain; returns the candidate final Msg, if any."""
        candidate: Msg | None = None
        interrupted = False

        async def sink(item: Any) -> None:
            nonlocal candidate, interrupted
            if isinstance(item, Msg):
                candidate = item
                return
            if isinstance(item, ModelCallEndEvent):
                interrupted = item.finished_reason == FinishedReason.INTERRUPTED
            await emit(item)

        await self._reasoning_chain.run({"tool_choice": tool_choice}, sink)
        if interrupted:
            raise StopReply
        return candidate

    async def _reasoning_core(self, kwargs: dict[str, Any], emit: Emit) -> None:
        tool_choice = kwargs.get("tool_choice")
        reply_id = self.state.reply_id
        await emit(ModelCallStartEvent(reply_id=reply_id, model_name=_model_name(self.model)))
        model_input = await self._prepare_model_input()
        converter = ChunkConverter(reply_id)
        completed: ChatResponse | None = None
        streamed = False

        async def model_sink(response: ChatResponse) -> None:
            nonlocal completed, streamed
            if response.is_last:
                completed = response
                if streamed:
                    return
                # A non-streaming response (no deltas came before it) is converted once, as
                # if it were a single chunk (reference/agent.md §2.1), so the consumer still
                # sees its text, thinking and tool-call blocks.
            else:
                streamed = True
            for event in converter.convert(response):
                await emit(event)

        try:
            await self._call_model(
                model_input["messages"], model_input["tools"], tool_choice, model_sink
            )
        except BaseException as exc:
            with trio.CancelScope(shield=True) as cleanup:
                # Shielded so open blocks are closed and the partial response saved while the
                # reply is cancelled; bounded by react_config.interrupt_grace.
                cleanup.deadline = trio.current_time() + self.react_config.interrupt_grace
                for event in converter.finish():
                    await emit(event)
                if is_cancellation(exc):
                    partial = completed or ChatResponse(content=[])
                    await self._end_model_call(
                        emit, attrs.evolve(partial, finished_reason=FinishedReason.INTERRUPTED)
                    )
            raise
        if completed is None:
            # Close the blocks the deltas opened, as for any other failed model call, so the
            # ERROR end does not leave a dangling TEXT/TOOL_CALL start in the event stream.
            for event in converter.finish():
                await emit(event)
            raise RuntimeError(
                "Model returned an empty streaming response: no is_last=True chunk was "
                "received. A model or on_model_call middleware must end with a complete response."
            )
        with trio.CancelScope(shield=True) as finishing:
            # Shielded so a cancellation landing here cannot split the finished call between
            # what the consumer saw and what the context holds; bounded by
            # react_config.interrupt_grace.
            finishing.deadline = trio.current_time() + self.react_config.interrupt_grace
            for event in converter.finish():
                await emit(event)
            await self._end_model_call(emit, completed)
        content = completed.content
        thinking_only = bool(content) and all(isinstance(b, ThinkingBlock) for b in content)
        if (
            completed.finished_reason != FinishedReason.INTERRUPTED
            and not any(isinstance(b, ToolCallBlock) for b in content)
            and not thinking_only
        ):
            await emit(
                AssistantMsg(
                    self.name,
                    copy.deepcopy(list(content)),
                    id=self.state.reply_id,
                    finished_at=_now(),
                    finished_reason=ReplyFinishedReason.COMPLETED,
                    usage=self._reply_usage(),
                )
            )

    async def _end_model_call(self, emit: Emit, response: ChatResponse) -> None:
        """Save the response's blocks (minus audio) to the context, then emit MODEL_CALL_END.

        Saving first keeps the context consistent with the streamed deltas even if the end
        event cannot be delivered.
        """
        usage = response.usage
        blocks = [
            copy.deepcopy(b)
            for b in response.content
            if not (isinstance(b, DataBlock) and b.source.media_type.startswith("audio/"))
        ]
        if blocks or usage is not None:
            msg = self.state.append_context(self.name, blocks)
            if usage is not None:
                msg.append_usage(
                    Usage(
                        input_tokens=usage.input_tokens,
                        output_tokens=usage.output_tokens,
                        cache_input_tokens=usage.cache_input_tokens or 0,
                        cache_creation_input_tokens=usage.cache_creation_input_tokens or 0,
                    )
                )
        await emit(
            ModelCallEndEvent(
                reply_id=self.state.reply_id,
                input_tokens=usage.input_tokens if usage else 0,
                output_tokens=usage.output_tokens if usage else 0,
                cache_input_tokens=(usage.cache_input_tokens or 0) if usage else 0,
                cache_creation_input_tokens=(usage.cache_creation_input_tokens or 0)
                if usage
                else 0,
                finished_reason=response.finished_reason,
            )
        )

    async def _call_model(
        self,
        messages: list[Msg],
        tools: list[dict[str, Any]],
        tool_choice: ToolChoice | None,
        sink: Emit,
    ) -> None:
        """The ``on_model_call`` chain with agent-level retries, then the fallback model.

        Any ``Exception`` is retried (``model_config.max_retries`` extra attempts per model)
        unless the attempt already emitted chunks: a stream is never replayed.
        """
        models = [self.model]
        if self.model_config.fallback_model is not None:
            models.append(self.model_config.fallback_model)
        last_error: Exception | None = None
        for model in models:
            for attempt in range(self.model_config.max_retries + 1):
                emitted = False

                async def attempt_sink(response: Any) -> None:
                    nonlocal emitted
                    # Only deltas reach the consumer.  A lone final response (such as the
                    # empty INTERRUPTED partial of an inner call that a middleware abandoned
                    # before raising) must not block the retry.
                    if not getattr(response, "is_last", False):
                        emitted = True
                    await sink(response)

                kwargs = {
                    "current_model": model,
                    "messages": messages,
                    "tools": tools,
                    "tool_choice": tool_choice,
                }
                try:
                    await self._model_call_chain.run(kwargs, attempt_sink)
                except Exception as exc:
                    if emitted:
                        raise
                    last_error = exc
                    logger.warning(
                        "model call to %s failed (attempt %d): %s",
                        _model_name(model),
                        attempt + 1,
                        exc,
                    )
                    continue
                return
        assert last_error is not None
        raise last_error

    async def _model_call_core(self, kwargs: dict[str, Any], emit: Emit) -> None:
        model = kwargs["current_model"]
        response = await model(
            kwargs["messages"], kwargs.get("tools"), kwargs.get("tool_choice"), emit=emit
        )
        await emit(response)

    async def _prepare_model_input(self) -> dict[str, Any]:
        """The messages and tool schemas of the next model call."""
        messages: list[Msg] = []
        prompt = await self._get_system_prompt()
        if prompt:
            messages.append(SystemMsg("system", prompt))
        summary = self.state.summary
        if summary:
            messages.append(UserMsg("user", summary if isinstance(summary, str) else list(summary)))
        messages.extend(self.state.context)
        _compress.ensure_compression_tool(self)
        tools = self.toolkit.get_tool_schemas(self.state.tool_context.activated_groups)
        return {"messages": messages, "tools": tools}

    async def _get_system_prompt(self) -> str:
        parts = [self.system_prompt] if self.system_prompt else []
        skill_instructions = getattr(self.toolkit, "get_skill_instructions", None)
        if callable(skill_instructions):
            extra = skill_instructions(self.state.tool_context.activated_groups)
            if extra:
                parts.append(extra)
        prompt = "\n".join(parts)
        for hook in self._system_prompt_hooks:
            prompt = await hook(self, prompt)
        return prompt

    # -- acting and permissions (see _acting.py) --------------------------------------------------

    async def _acting_core(self, kwargs: dict[str, Any], emit: Emit) -> None:
        response = await self.toolkit.call_tool(kwargs["tool_call"], state=self.state, emit=emit)
        await emit(response)

    async def _check_permission_core(self, kwargs: dict[str, Any], emit: Emit) -> None:
        await emit(await _acting.check_permission_core(self, kwargs))

    async def _compress_core(self, kwargs: dict[str, Any], emit: Emit) -> None:
        await _compress.compress_context(
            self, kwargs.get("context_config") or self.context_config, kwargs.get("instructions")
        )
        await emit(None)


def _now() -> str:
    from .._core.ids import generate_timestamp

    return generate_timestamp()


def _model_name(model: Any) -> str:
    return str(getattr(model, "model", type(model).__name__))


def _classify_inputs(
    inputs: ReplyInputs,
) -> tuple[
    UserConfirmResultEvent | ExternalExecutionResultEvent | UserInterruptEvent | None, list[Msg]
]:
    if inputs is None:
        return None, []
    if isinstance(
        inputs, UserConfirmResultEvent | ExternalExecutionResultEvent | UserInterruptEvent
    ):
        return inputs, []
    if isinstance(inputs, Msg):
        return None, [inputs]
    if isinstance(inputs, str):
        raise TypeError("reply() takes a Msg, not a str; wrap it: UserMsg('user', text)")
    if isinstance(inputs, Sequence):
        return None, list(inputs)
    raise TypeError(f"unsupported reply input: {type(inputs).__name__}")


def _convert_unsupported(block: Any, patterns: Sequence[str]) -> Any:
    if not isinstance(block, DataBlock):
        return block
    media_type = block.source.media_type
    if any(fnmatch.fnmatch(media_type, p) for p in patterns):
        return block
    named = f"named '{block.name}' " if block.name else ""
    if isinstance(block.source, URLSource):
        text = (
            f"<system-reminder>An attached file {named}is saved into {block.source.url}."
            "</system-reminder>"
        )
    else:
        text = (
            f"<system-reminder>An unsupported input file {named}is attached with media type "
            f"'{media_type}'.</system-reminder>"
        )
    return TextBlock(text=text)
