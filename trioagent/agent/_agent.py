"""The ReAct agent: its public API and the reply loop, over a per-reply context and the
collaborators that reason, act, resume, compress and supervise background work.

A reply always ends with exactly one ``ReplyEndEvent``, its last event: ``interrupt()`` makes
``reply()`` return the interrupted Msg; an outer cancellation emits the same INTERRUPTED end
and then propagates; an error emits an ERROR end and then propagates.
"""

from __future__ import annotations

import functools
import logging
import types
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from .._core.chain import Chain, Kwargs, Layer, returning_layer
from .._core.concurrency import is_cancellation
from .._core.emit import Emit
from .._core.ids import generate_id
from ..event import (
    AgentEvent,
    ReplyEndEvent,
    ReplyStartEvent,
    UserInterruptEvent,
)
from ..exception import ReplyInterruptedError, error_info
from ..message import (
    Msg,
    TextBlock,
    ToolCallBlock,
)
from ..model import ChatModelBase, as_chat_model
from ..permission import PermissionDecision, PermissionEngine
from ..tool import ToolBase, Toolkit
from ..types import ReplyFinishedReason
from ._acting import Actor
from ._as_tool import AgentTool, relaying
from ._background import BackgroundToolHandle, Supervisor
from ._compress import CompressContextTool, Compressor
from ._config import ContextConfig, InjectionConfig, ModelConfig, ReActConfig
from ._injection import Injector
from ._inputs import (
    check_arguments,
    check_reply_call,
    checked_copies,
    classify_inputs,
    message_list,
)
from ._mcp import offer_defaults_to_mcp_clients
from ._protocol import (
    ActingItem,
    MiddlewareLike,
    ReplyInputs,
    check_middlewares,
    check_on_event,
)
from ._reasoning import Reasoner, prompt_layer
from ._reply import ModelInput, Reply, ReplyItem, ReplyTools, StopReply
from ._results import ResultWriter
from ._resume import Resumer, parked_summary
from ._state import AgentState, ReplyContext
from ._steps import Exit, Reason, final_msg, next_step
from ._stream import ReplyStream
from ._structured import StructuredOutputTool

__all__ = ["Agent"]

logger = logging.getLogger("trioagent.agent")


class Agent:
    """A ReAct agent whose every step can be intercepted by middleware.

    Args:
        name: the agent's name (also the ``name`` of its messages).
        system_prompt: the base system prompt (``on_system_prompt`` middlewares transform it).
        model: the chat model, or a ``"provider:model"`` spec string such as
            ``"openai:gpt-4o"`` (built with :func:`~trioagent.model.chat_model_from_spec`, key
            and base URL from the provider's environment variables); ``agent.model`` may be
            swapped between calls.
        toolkit: the tools the model may call (an empty :class:`~trioagent.tool.Toolkit` by
            default).  The agent never changes it: tools of one reply (the structured-output
            and the compression tool) live in that reply only, so a toolkit can be shared.
        middlewares: the first one is the outermost layer of every hook it implements.
        state: a restored :class:`AgentState` (a fresh one by default).

    Replies::

        msg = await agent.reply(UserMsg("hi"))              # or: await agent(msg)
        async with agent.stream(UserMsg("hi")) as reply:
            async for event in reply:
                ...
        agent.interrupt()                                   # from any task
    """

    def __init__(
        self,
        name: str,
        system_prompt: str = "",
        model: ChatModelBase | str | None = None,
        toolkit: Toolkit | None = None,
        middlewares: Sequence[MiddlewareLike] | None = None,
        state: AgentState | None = None,
        model_config: ModelConfig | None = None,
        context_config: ContextConfig | None = None,
        react_config: ReActConfig | None = None,
        injection_config: InjectionConfig | None = None,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError("Agent name must be a non-empty string")
        if model is None:
            raise TypeError(
                "Agent needs a chat model: a 'provider:model' string such as 'openai:gpt-4o' "
                "or a model object such as OpenAIChatModel('gpt-4o') (trioagent.model)"
            )
        self.model = as_chat_model(model, "Agent's model")
        check_arguments(self.model, system_prompt, toolkit, state, model_config)
        # A model built from a spec string is the agent's: `async with agent:` closes it.
        self._supervisor = Supervisor(self.model if isinstance(model, str) else None)
        self.name = name
        self.system_prompt = system_prompt
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
        offer_defaults_to_mcp_clients(self.toolkit, self.model, self.permission_engine)
        self.middlewares: tuple[MiddlewareLike, ...] = check_middlewares(middlewares or ())

        def using(hook: str) -> list[MiddlewareLike]:
            return [mw for mw in self.middlewares if mw.is_implemented(hook)]

        self._reply_chain: Chain[ReplyItem] = Chain(
            [functools.partial(mw.on_reply, self) for mw in using("on_reply")], self._reply_core
        )
        self._compress_layers: list[Layer[None]] = [
            returning_layer(functools.partial(mw.on_compress_context, self))
            for mw in using("on_compress_context")
        ]
        self._compressor = Compressor(self)
        self._reasoner = Reasoner(
            self,
            [functools.partial(mw.on_reasoning, self) for mw in using("on_reasoning")],
            [functools.partial(mw.on_model_call, self) for mw in using("on_model_call")],
            [
                prompt_layer(functools.partial(mw.on_system_prompt, self))
                for mw in using("on_system_prompt")
            ],
        )
        permission_layers: list[Layer[PermissionDecision]] = [
            returning_layer(functools.partial(mw.on_check_permission, self))
            for mw in using("on_check_permission")
        ]
        self._actor = Actor(
            self,
            [functools.partial(mw.on_acting, self) for mw in using("on_acting")],
            permission_layers,
            self._supervisor,
            self._compressor.truncate,
        )
        self._resumer = Resumer(self)
        self._injector = Injector(self)
        self._reply: Reply | None = None
        self._compress_tool: CompressContextTool | None = None

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
        if on_event is not None:
            check_on_event(on_event)
        with relaying(on_event):
            run = await self._run_reply(inputs, structured_schema, None, on_event=on_event)
        return self._final_msg(run)

    def stream(self, inputs: ReplyInputs = None, *, structured_schema: Any = None) -> ReplyStream:
        """Run one reply in a background task and stream its events; see :class:`ReplyStream`."""

        async def run(consume: Emit[ReplyItem], registered: Callable[[], object]) -> Reply:
            with relaying(consume):
                return await self._run_reply(inputs, structured_schema, consume, registered)

        return ReplyStream(run)

    def as_tool(self, name: str | None = None, description: str | None = None) -> AgentTool:
        """This agent as a tool another agent can call; see :class:`AgentTool`."""
        return AgentTool(self, name=name, description=description)

    def interrupt(self) -> None:
        """Cancel the running reply, if any (synchronous, idempotent, callable from any task).

        The reply closes its open blocks, writes an interrupted result for every unfinished tool
        call, emits ``ReplyEndEvent(INTERRUPTED)`` and ``reply()`` returns the interrupted Msg.
        """
        if self._reply is not None:
            self._reply.scope.cancel()

    @property
    def is_replying(self) -> bool:
        """Whether a reply is running now."""
        return self._reply is not None

    @property
    def background_tasks(self) -> Mapping[str, BackgroundToolHandle]:
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

    async def run_in_background(self, tool_call: ToolCallBlock, emit: Emit[ActingItem]) -> None:
        """Move a call to the supervision scope of ``async with agent:`` (for an ``on_acting``
        middleware that decides so itself).

        ``emit`` receives the "running in background" result at once; the task re-runs the
        whole ``on_acting`` chain (the calling middleware included, which must recognise its
        own re-entry), and its real result reaches the model on a later reasoning step.

        Raises:
            BackgroundToolError: the supervision scope is not open.
            RuntimeError: no reply is running.
        """
        reply = self._reply
        if reply is None:
            raise RuntimeError("run_in_background is for on_acting middlewares of a running reply")
        chain = self._actor.acting_chain(reply)

        def acting(call: ToolCallBlock, sink: Emit[ActingItem]) -> Awaitable[None]:
            return chain.run({"tool_call": call}, sink)

        tool = reply.tools.get_tool(tool_call.name)
        await self._supervisor.run_in_background(tool_call, tool, acting, emit)

    async def observe(self, msgs: Msg | Sequence[Msg] | None) -> None:
        """Append messages to the context without replying (validated deep copies).

        Raises:
            ValueError: the agent is parked (calls await a confirmation or an external
                result): a message appended now would orphan them, as ``reply(new Msg)``
                would.  Resume or abort the reply first.
        """
        if msgs is None:
            return
        incoming = message_list(msgs, "msgs")
        if self.state.has_awaiting_tool_calls(self.name):
            raise ValueError(
                "Agent is parked: tool calls await a confirmation or an external result. "
                "Resume it (UserConfirmResultEvent / ExternalExecutionResultEvent) or abort it "
                "(UserInterruptEvent) before observing new messages."
            )
        self.state.context.extend(self._checked_copies(incoming, "msgs"))

    async def compress_context(
        self, context_config: ContextConfig | None = None, instructions: str | None = None
    ) -> None:
        """Run the ``on_compress_context`` chain around the compression check.

        Compresses when the next request would pass ``trigger_ratio`` of the model's context
        size (``context_config`` overrides the agent's for this check).
        """
        model_input = await self._reasoner.model_input(self._tools_of(self._reply))
        await self._compress(model_input, context_config, instructions)

    async def _compress(
        self,
        model_input: ModelInput,
        context_config: ContextConfig | None = None,
        instructions: str | None = None,
    ) -> None:
        core = functools.partial(self._compress_core, model_input)
        kwargs = {"context_config": context_config, "instructions": instructions}
        await Chain(self._compress_layers, core).result(kwargs)

    async def _compress_core(
        self, model_input: ModelInput, kwargs: Kwargs, emit: Emit[None]
    ) -> None:
        cfg = kwargs.get("context_config") or self.context_config
        await self._compressor.compress(cfg, kwargs.get("instructions"), model_input)
        await emit(None)

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
        shields itself from cancellation holds the block open until it returns.  A model the
        agent built from a ``"provider:model"`` string is closed too; yours stay open.
        """
        await self._supervisor.close(exc)

    # -- the run and its exactly-once end ---------------------------------------------------------

    def _final_msg(self, run: Reply) -> Msg:
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
        consumer: Emit[ReplyItem] | None,
        on_registered: Callable[[], object] | None = None,
        on_event: Callable[[AgentEvent], Awaitable[None]] | None = None,
    ) -> Reply:
        if self._reply is not None:
            raise RuntimeError(f"agent {self.name!r} is already replying; one reply at a time")
        check_reply_call(inputs, structured_schema)  # a bad input changes nothing
        run = Reply(consumer, self.toolkit, self.react_config.interrupt_grace, on_event)
        self._reply = run
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
                    # ERROR end, or a layer died on the way out): deliver it directly, within
                    # what is left of the cleanup budget.
                    reason = outcome or run.outcome or ReplyFinishedReason.INTERRUPTED
                    exit_msg = run.exit_msg
                    if exit_msg is None or exit_msg.finished_reason != reason:
                        exit_msg = run.exit_msg = self._closing_msg(reason, error)
                    items: list[ReplyItem] = [self._end_event(run, reason, error), exit_msg]
                    await run.hand_over(run.deliver, items)
                elif run.final_msg is None and run.exit_msg is not None:
                    # The cancellation landed while the end (or the Msg after it) was on its
                    # way to the consumer, or the consumer was too slow for the cleanup budget:
                    # the reply did end as its end event says, so the caller gets its Msg.
                    run.final_msg = run.exit_msg
                elif run.final_msg is None and not run.started and run.scope.cancelled_caught:
                    # interrupt() landed before the reply started (e.g. during an on_reply
                    # middleware's pre-logic): nothing was emitted, but the caller asked for an
                    # interruption, so it gets the interrupted Msg, not "no final message".
                    msg = self._closing_msg(ReplyFinishedReason.INTERRUPTED, None)
                    msg.id = run.reply_id or generate_id()
                    await run.deliver(msg)
            finally:
                self._reply = None
        return run

    def _end_event(
        self, run: Reply, reason: ReplyFinishedReason, error: BaseException | None
    ) -> ReplyEndEvent:
        return ReplyEndEvent(
            session_id=self.state.session_id,
            reply_id=run.reply_id or self.state.reply_id,
            finished_reason=reason,
            error=error_info(error) if error is not None else None,
        )

    def _closing_msg(self, reason: ReplyFinishedReason, error: BaseException | None) -> Msg:
        """The final Msg of an interrupted or failed reply (never written to the context)."""
        msg = final_msg(self, self.react_config.interruption_message, reason)
        if error is not None:
            msg.error = error_info(error)
            msg.content = [TextBlock(text=f"The reply failed: {msg.error.message}")]
        return msg

    # -- on_reply core ----------------------------------------------------------------------------

    async def _reply_core(self, kwargs: Kwargs, emit: Emit[ReplyItem]) -> None:
        run = self._reply
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
        emit: Emit[ReplyItem],
        run: Reply,
        reason: ReplyFinishedReason,
        error: BaseException | None,
    ) -> None:
        """Close unfinished tool calls, then emit the end event and the final Msg.

        The state comes first: the interrupted results are written and the final Msg recorded
        before anything is emitted, so a consumer slower than the cleanup budget delays or
        loses closing events, never the results or the Msg ``reply()`` returns.
        """
        events = ResultWriter(self.state, self.name).close_unfinished(error)
        run.outcome = reason
        closing = self._closing_msg(reason, error)
        run.exit_msg = closing
        await run.hand_over(emit, [*events, self._end_event(run, reason, error), closing])

    async def _reply_body(self, kwargs: Kwargs, emit: Emit[ReplyItem], run: Reply) -> None:
        inputs = kwargs.get("inputs")
        schema = kwargs.get("structured_schema")
        event, msgs = classify_inputs(inputs)
        run.session_id = self.state.session_id
        if isinstance(event, UserInterruptEvent):
            if self.state.has_awaiting_tool_calls(self.name):
                await self._resumer.abort_nested(run.tools)
                run.started = True
                run.reply_id = self.state.reply_id
                raise StopReply
            return
        resuming = await self._resumer.check(event, run.tools)
        if resuming:
            assert event is not None
            if schema is not None:
                logger.warning(
                    "structured_schema is ignored when resuming a parked reply; "
                    "the parked reply's schema is used"
                )
            run.started = True
            run.reply_id = self.state.reply_id
            await self._resumer.apply(event, emit, run.tools)
        else:
            incoming = self._checked_copies(msgs, "inputs")  # before anything changes
            if schema is not None:
                self._own_tools(schema)  # a bad schema raises here, not after the append
            ResultWriter(self.state, self.name).close_left_by_a_snapshot()
            self.state.context.extend(incoming)
            self.state.reply_context = ReplyContext(structured_schema=schema)
            run.reply_id = self.state.reply_id
            run.started = True
            await emit(
                ReplyStartEvent(
                    session_id=self.state.session_id, reply_id=run.reply_id, name=self.name
                )
            )
        schema = self.state.reply_context.structured_schema
        run.tools = ReplyTools(self.toolkit, self._own_tools(schema))
        await self._loop(emit, run)

    def _own_tools(self, structured_schema: object) -> list[ToolBase]:
        """The tools of one reply only: the structured-output tool (for a schema) and the
        compression tool (when enabled)."""
        tools: list[ToolBase] = []
        if structured_schema is not None:
            tools.append(StructuredOutputTool(structured_schema))
        if self.context_config.compression_tool_enabled:
            if self._compress_tool is None:
                self._compress_tool = CompressContextTool(self)
            tools.append(self._compress_tool)
        return tools

    def _tools_of(self, reply: Reply | None) -> ReplyTools:
        """The tools of the next request: the reply's, or outside a reply the caller's
        toolkit plus the compression tool."""
        if reply is not None:
            return reply.tools
        return ReplyTools(self.toolkit, self._own_tools(None))

    async def _loop(self, emit: Emit[ReplyItem], run: Reply) -> None:
        candidate: Msg | None = None
        while True:
            action = next_step(self, candidate)
            if isinstance(action, Exit):
                if action.events is None:
                    run.parked = True
                    awaiting = self.state.get_awaiting_tool_calls(self.name)
                    logger.warning("agent %r: %s", self.name, parked_summary(awaiting))
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
                if not run.made_progress:
                    raise RuntimeError(
                        "A middleware swallowed the ReplyEndEvent twice without any "
                        "reasoning/acting in between; the reply cannot make progress."
                    )
                run.made_progress = False
                candidate = None
                continue
            run.made_progress = True
            if isinstance(action, Reason):
                candidate = await self._reason(run, action, emit)
            else:
                await self._actor.act(run, action.calls, emit)
            if not self.state.get_unfinished_tool_calls(self.name):
                self.state.cur_iter += 1

    async def _reason(self, run: Reply, step: Reason, emit: Emit[ReplyItem]) -> Msg | None:
        """One reasoning step: background results, compression, injection, the model call.

        The model input is built once for the step (``on_system_prompt`` runs once) and shared
        by the compression check, the injection and the call.
        """
        if step.hint is not None:
            self.state.append_context(self.name, [step.hint])
        await self._supervisor.deliver_results(self.state, self.name, emit)
        model_input = await self._reasoner.model_input(run.tools)
        await self._compress(model_input)
        await self._injector.inject(model_input, emit)
        return await self._reasoner.step(run, model_input, step.tool_choice, emit)

    # -- inputs ---------------------------------------------------------------------------------

    def _checked_copies(self, msgs: Sequence[Msg], label: str) -> list[Msg]:
        """Checked deep copies of incoming messages (all checked before any is appended)."""
        patterns = getattr(
            getattr(self.model, "formatter", None), "supported_input_media_types", None
        )
        return checked_copies(msgs, label, patterns)
