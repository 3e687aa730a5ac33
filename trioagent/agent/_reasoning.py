"""Reasoning: the model input of a step, the ``on_reasoning`` and ``on_model_call`` chains,
agent-level retries and the fallback model."""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, Sequence

import attrs

from .._core.chain import Chain, Kwargs, Layer, NextHandler
from .._core.concurrency import is_cancellation
from .._core.copying import deep_copy
from .._core.emit import Emit
from .._core.ids import generate_timestamp
from ..event import (
    AgentEvent,
    ModelCallEndEvent,
    ModelCallStartEvent,
    ToolResultEndEvent,
    ToolResultStartEvent,
    ToolResultTextDeltaEvent,
)
from ..message import (
    AssistantMsg,
    DataBlock,
    Msg,
    ThinkingBlock,
    ToolCallBlock,
    ToolCallState,
    ToolResultBlock,
    ToolResultState,
    Usage,
)
from ..model import ChatModelBase, ChatResponse
from ..types import FinishedReason, ReplyFinishedReason, ToolChoice
from ._convert import ChunkConverter
from ._protocol import AgentLike
from ._reply import ModelInput, Reply, ReplyItem, ReplyTools, StopReply

__all__ = [
    "CUT_OFF_TEXT",
    "FILTERED_TEXT",
    "Reasoner",
    "model_name",
    "prompt_layer",
    "reply_usage",
]

logger = logging.getLogger("trioagent.agent")

#: The error result of a tool call made in a response cut off at the model's output limit.
CUT_OFF_TEXT = (
    "Error: this tool call was not run: the response that made it was cut off at the "
    "model's output limit (max tokens), so its arguments may be cut off. Call the tool "
    "again with shorter arguments, or make fewer calls at once."
)


#: The error result of a tool call made in a response stopped by the provider's content filter.
FILTERED_TEXT = (
    "Error: this tool call was not run: the response that made it was stopped by the "
    "provider's content filter, so its arguments may be cut off."
)

#: The error text of the tool calls of a response that ended early, by its finished reason.
_REFUSAL_TEXTS = {
    FinishedReason.MAX_TOKENS: CUT_OFF_TEXT,
    FinishedReason.CONTENT_FILTER: FILTERED_TEXT,
}


def _refuse_cut_off_calls(blocks: Sequence[object], text: str) -> list[ToolResultBlock]:
    """An error result (``text``) for each tool call of a response that ended early (each
    call finished)."""
    results: list[ToolResultBlock] = []
    for block in blocks:
        if isinstance(block, ToolCallBlock):
            block.state = ToolCallState.FINISHED
            results.append(
                ToolResultBlock(
                    id=block.id,
                    name=block.name,
                    output=text,
                    state=ToolResultState.ERROR,
                    finished_at=generate_timestamp(),
                )
            )
    return results


def model_name(model: object) -> str:
    """How logs and events name a model."""
    return str(getattr(model, "model", type(model).__name__))


def reply_usage(agent: AgentLike) -> Usage | None:
    """The token usage accumulated by the current reply's message, if any."""
    last = agent.state.reply_message(agent.name)
    if last is None or last.id != agent.state.reply_id or last.usage is None:
        return None
    return attrs.evolve(last.usage)


async def _model_call_core(kwargs: Kwargs, emit: Emit[ChatResponse]) -> None:
    model: ChatModelBase = kwargs["current_model"]
    response = await model(
        kwargs["messages"], kwargs.get("tools"), kwargs.get("tool_choice"), emit=emit
    )
    await emit(response)


async def _prompt_core(kwargs: Kwargs, emit: Emit[str]) -> None:
    await emit(kwargs["prompt"])


def prompt_layer(transform: Callable[[str], Awaitable[str]]) -> Layer[str]:
    """A chain layer applying an ``on_system_prompt`` transformer (outermost applies first)."""

    async def layer(kwargs: Kwargs, next_handler: NextHandler[str], emit: Emit[str]) -> None:
        prompt = await transform(kwargs["prompt"])
        if not isinstance(prompt, str):
            raise TypeError(f"on_system_prompt returned {type(prompt).__name__}, expected a str")
        await next_handler(prompt=prompt)

    return layer


class Reasoner:
    """Runs one reasoning step: the model call through its chains, its events and its result.

    Args:
        agent: the agent the hooks see (its model, name, state and configs are read at every
            step, so swapping ``agent.model`` routes the next call).
        reasoning_layers: the ``on_reasoning`` layers, outermost first.
        model_call_layers: the ``on_model_call`` layers, outermost first.
        prompt_layers: the ``on_system_prompt`` transformers as layers, first applied first.
    """

    def __init__(
        self,
        agent: AgentLike,
        reasoning_layers: Sequence[Layer[ReplyItem]],
        model_call_layers: Sequence[Layer[ChatResponse]],
        prompt_layers: Sequence[Layer[str]],
    ) -> None:
        self._agent = agent
        self._reasoning_layers = tuple(reasoning_layers)
        self._model_call = Chain(model_call_layers, _model_call_core)
        self._system_prompt = Chain(prompt_layers, _prompt_core)

    async def model_input(self, tools: ReplyTools) -> ModelInput:
        """Build the input of the next model call.

        The system prompt is the agent's, then the toolkit's listing of the skills visible in
        the active groups, then the ``on_system_prompt`` transformers (run here, once).
        """
        agent = self._agent
        groups = agent.state.tool_context.activated_groups
        skills = await tools.toolkit.get_skill_instructions(groups)
        prompt = "\n".join(part for part in (agent.system_prompt, skills) if part)
        if self._system_prompt.layers:
            prompt = await self._system_prompt.result({"prompt": prompt})
        schemas = tools.get_tool_schemas(agent.state.tool_context.activated_groups)
        return ModelInput(agent.state, prompt, schemas)

    async def step(
        self,
        reply: Reply,
        model_input: ModelInput,
        tool_choice: ToolChoice | None,
        emit: Emit[ReplyItem],
    ) -> Msg | None:
        """Run the ``on_reasoning`` chain over the step's ``model_input``; returns the
        candidate final Msg, if any."""
        candidate: Msg | None = None
        interrupted = False

        async def sink(item: ReplyItem) -> None:
            nonlocal candidate, interrupted
            if isinstance(item, Msg):
                candidate = item
                return
            if isinstance(item, ModelCallEndEvent):
                interrupted = item.finished_reason == FinishedReason.INTERRUPTED
            await emit(item)

        chain = Chain(self._reasoning_layers, functools.partial(self._core, reply, model_input))
        await chain.run({"tool_choice": tool_choice}, sink)
        if interrupted:
            raise StopReply
        return candidate

    async def _core(
        self, reply: Reply, model_input: ModelInput, kwargs: Kwargs, emit: Emit[ReplyItem]
    ) -> None:
        agent = self._agent
        reply_id = agent.state.reply_id
        await emit(ModelCallStartEvent(reply_id=reply_id, model_name=model_name(agent.model)))
        converter = ChunkConverter(reply_id)
        completed: ChatResponse | None = None
        streamed = False
        #: The events of a non-streaming response, emitted once the call returned.
        unstreamed: list[AgentEvent] = []

        async def model_sink(response: ChatResponse) -> None:
            nonlocal completed, streamed
            if response.is_last:
                completed = response
                if not streamed:
                    # A non-streaming response (no deltas came before it) is converted once,
                    # as if it were a single chunk, so the consumer still sees its text,
                    # thinking and tool-call blocks -- after the call, with its closing events
                    # (never inside the model's own cancellation cleanup).
                    unstreamed.extend(converter.convert(response))
                return
            streamed = True
            for event in converter.convert(response):
                await emit(event)

        try:
            await self._call_model(
                model_input.messages(), model_input.tools, kwargs.get("tool_choice"), model_sink
            )
        except BaseException as exc:
            # The partial response is saved (a state write, at once) before its closing events
            # are emitted within the reply's cleanup budget: a slow consumer cannot lose it.
            closing: list[ReplyItem] = [*unstreamed, *converter.finish()]
            if is_cancellation(exc):
                partial = completed or ChatResponse(content=[])
                if partial.finished_reason != FinishedReason.INTERRUPTED:
                    partial = attrs.evolve(partial, finished_reason=FinishedReason.INTERRUPTED)
                closing.extend(self._save_response(partial))
            await reply.hand_over(emit, closing)
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
        # Saved before its closing events are emitted, so a cancellation landing while they
        # are on their way cannot split the finished call between what the consumer saw and
        # what the context holds.
        saved = self._save_response(completed)
        await reply.hand_over(emit, [*unstreamed, *converter.finish(), *saved])
        content = completed.content
        thinking_only = bool(content) and all(isinstance(b, ThinkingBlock) for b in content)
        if (
            completed.finished_reason != FinishedReason.INTERRUPTED
            and not any(isinstance(b, ToolCallBlock) for b in content)
            and not thinking_only
        ):
            await emit(
                AssistantMsg(
                    agent.name,
                    deep_copy(list(content)),
                    id=agent.state.reply_id,
                    finished_at=generate_timestamp(),
                    finished_reason=ReplyFinishedReason.COMPLETED,
                    usage=reply_usage(agent),
                )
            )

    def _save_response(self, response: ChatResponse) -> list[AgentEvent]:
        """Save the response's blocks (minus audio) to the context; returns the events that
        follow it: MODEL_CALL_END, then the results of refused calls.

        A state write with no checkpoint, done before those events are emitted, so the
        context holds what the streamed deltas showed even if the events cannot be
        delivered.  A response cut off at the output limit (``MAX_TOKENS``) or stopped by a
        content filter (``CONTENT_FILTER``) has its tool calls answered here, in the same
        write, with an error result (:data:`CUT_OFF_TEXT`, :data:`FILTERED_TEXT`): none of
        them runs on arguments that may be incomplete.
        """
        agent = self._agent
        usage = response.usage
        blocks = [
            deep_copy(b)
            for b in response.content
            if not (isinstance(b, DataBlock) and b.source.media_type.startswith("audio/"))
        ]
        refusal = _REFUSAL_TEXTS.get(response.finished_reason, "")
        refused = _refuse_cut_off_calls(blocks, refusal) if refusal else []
        if blocks or usage is not None:
            msg = agent.state.append_context(agent.name, [*blocks, *refused])
            if usage is not None:
                msg.append_usage(
                    Usage(
                        input_tokens=usage.input_tokens,
                        output_tokens=usage.output_tokens,
                        cache_input_tokens=usage.cache_input_tokens or 0,
                        cache_creation_input_tokens=usage.cache_creation_input_tokens or 0,
                    )
                )
        reply_id = agent.state.reply_id
        events: list[AgentEvent] = [
            ModelCallEndEvent(
                reply_id=reply_id,
                input_tokens=usage.input_tokens if usage else 0,
                output_tokens=usage.output_tokens if usage else 0,
                cache_input_tokens=(usage.cache_input_tokens or 0) if usage else 0,
                cache_creation_input_tokens=(usage.cache_creation_input_tokens or 0)
                if usage
                else 0,
                finished_reason=response.finished_reason,
            )
        ]
        for result in refused:
            events += [
                ToolResultStartEvent(
                    reply_id=reply_id, tool_call_id=result.id, tool_call_name=result.name
                ),
                ToolResultTextDeltaEvent(reply_id=reply_id, tool_call_id=result.id, delta=refusal),
                ToolResultEndEvent(reply_id=reply_id, tool_call_id=result.id, state=result.state),
            ]
        return events

    async def _call_model(
        self,
        messages: list[Msg],
        tools: list[Kwargs],
        tool_choice: ToolChoice | None,
        sink: Emit[ChatResponse],
    ) -> None:
        """The ``on_model_call`` chain with agent-level retries, then the fallback model.

        Any ``Exception`` is retried (``model_config.max_retries`` extra attempts per model)
        unless the attempt already emitted chunks: a stream is never replayed.
        """
        agent = self._agent
        models = [agent.model]
        if agent.model_config.fallback_model is not None:
            models.append(agent.model_config.fallback_model)
        if len(models) == 1 and not agent.model_config.max_retries:
            # One attempt, nothing to retry: the chain's sink is the step's own.
            kwargs = {
                "current_model": agent.model,
                "messages": messages,
                "tools": tools,
                "tool_choice": tool_choice,
            }
            await self._model_call.run(kwargs, sink)
            return
        last_error: Exception | None = None
        for model in models:
            for attempt in range(agent.model_config.max_retries + 1):
                emitted = False

                async def attempt_sink(response: ChatResponse) -> None:
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
                    await self._model_call.run(kwargs, attempt_sink)
                except Exception as exc:
                    if emitted:
                        raise
                    last_error = exc
                    logger.info(  # handled: retried, or raised once the attempts run out
                        "model call to %s failed (attempt %d): %s",
                        model_name(model),
                        attempt + 1,
                        exc,
                    )
                    continue
                return
        assert last_error is not None
        raise last_error
