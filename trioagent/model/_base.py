"""``ChatModelBase``: the provider-independent half of every chat model.

A provider implements two hooks — :meth:`ChatModelBase._stream_api` (pass delta chunks to a
plain ``emit`` callback, a :data:`ChunkSink`) and :meth:`ChatModelBase._call_api` (return one
complete response) — and the base class does the rest: tool-choice validation, the streaming
accumulator, retries with capped exponential backoff, the total deadline, and the INTERRUPTED
partial response on cancellation.

Calling a model, push form (what the agent uses)::

    response = await model(messages, tools, tool_choice, emit=on_chunk)

The provider's stream runs in the caller's task and feeds the accumulator there: no reader
task, no channel, no task switch per delta.  ``on_chunk`` receives every non-empty delta
(``is_last=False``); the complete response (``is_last=True``) is returned, not emitted.  If
the call is cancelled, ``on_chunk`` receives the partial response accumulated so far with
``finished_reason=INTERRUPTED`` and ``is_last=True``, and ``trio.Cancelled`` propagates.

Pull form, for code that calls a model directly (:class:`~trioagent.model.ModelStream`)::

    async with model.stream(messages, tools) as chunks:
        async for chunk in chunks:
            ...

The call runs in a reader task of a nursery owned by the block; chunks cross over a bounded
memory channel, and coalesce when the puller lags.
"""

from __future__ import annotations

import builtins
import copy
import json
import logging
from collections.abc import Awaitable, Callable
from typing import ClassVar, Self, TypeAlias, TypedDict

import attrs
import httpx2
import trio

from .._core.concurrency import reraise_unwrapped
from .._core.emit import Emit
from .._core.json_types import JSONObject
from .._http import DEFAULT_MAX_EVENT_SIZE, HTTPClientOwner, backoff_delay
from ..credential import CredentialBase
from ..exception import ModelError, ModelInvalidRequestError, ModelTimeoutError
from ..formatter import FormatterBase
from ..message import (
    DataBlock,
    HintBlock,
    Msg,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from ..types import FinishedReason, ToolChoice
from ._accumulator import StreamAccumulator
from ._pull import ModelStream
from ._response import ChatResponse, finished_reason_of
from ._structured import (
    StructuredModel,
    StructuredResponse,
    generate_structured_output,
)

__all__ = ["ChatModelBase", "ChatModelOptions", "ChunkSink"]

logger = logging.getLogger("trioagent.model")

_LITERAL_MODES = frozenset({"auto", "none", "required"})
_DATA_BLOCK_TOKENS = 2000


class ChatModelOptions(TypedDict, total=False):
    """The :class:`ChatModelBase` options a provider passes through unchanged.

    A provider's constructor takes them as ``**options: Unpack[ChatModelOptions]``, so type
    checkers see every keyword; their meaning and defaults are documented on
    :class:`ChatModelBase`.  ``credential``, ``context_size`` and ``formatter`` are not here:
    each provider takes them explicitly, with its own credential class and defaults.
    """

    stream: bool
    max_retries: int
    retry_delay: float
    max_retry_delay: float
    http_client: httpx2.AsyncClient | None
    timeout: float | None
    read_timeout: float | None
    connect_timeout: float | None
    interrupt_grace: float
    max_event_size: int | None


@attrs.define(eq=False)
class _Call:
    """The state of one model call, shared by the retry loop and the cancellation handler."""

    messages: list[Msg]
    tools: list[JSONObject] | None
    tool_choice: ToolChoice | None
    emit: Emit[ChatResponse] | None
    acc: StreamAccumulator = attrs.Factory(StreamAccumulator)
    final: ChatResponse | None = None
    #: When the total ``timeout`` fires (trio time), if the model has one.
    deadline: float | None = None
    #: The last retryable provider error, being retried (named by a total-timeout error).
    retrying: ModelError | None = None

    async def absorb(self, chunk: ChatResponse) -> None:
        """Accumulate one chunk from the provider; pass non-empty deltas to ``emit``."""
        if chunk.is_last:
            # A final chunk built by the provider replaces the one the accumulator would build.
            self.final = chunk
            return
        self.acc.add(chunk)
        if chunk.content and self.emit is not None:
            await self.emit(chunk)


#: What a provider's :meth:`~ChatModelBase._stream_api` passes its deltas to: a plain emit
#: callback, ``await emit(delta)``, that returns once the delta was absorbed (and passed on).
ChunkSink: TypeAlias = Callable[[ChatResponse], Awaitable[None]]


class ChatModelBase(HTTPClientOwner):
    """Base class of chat models.

    Args:
        model: the provider's model name.
        credential: API key and base URL (``None``: the provider's credential class reads its
            environment variables).
        stream: stream the answer (deltas go to ``emit``) or make one plain request (kept
            as :attr:`streaming`; :meth:`stream` is the pull form of a call).
        max_retries: how many times a retryable provider error (429, 5xx, connection errors,
            timeouts) is retried — only while no content has arrived yet.
        retry_delay: the first backoff delay in seconds; doubled per retry, with jitter.
        max_retry_delay: cap for one backoff delay and for a provider's ``Retry-After``.
        context_size: the context window, used by context compression.
        formatter: turns messages into the provider's format (providers set a default).
        http_client: an ``httpx2.AsyncClient`` to use; the model never closes a client it was
            given.  Without one the model creates its own on first use; :meth:`aclose` (or
            ``async with model:``) closes it.
        timeout: total deadline of one call in seconds, retries included
            (:class:`~trioagent.exception.ModelTimeoutError` when exceeded, naming the provider
            error being retried, if any); ``None`` = none.  A ``Retry-After`` that would end
            past it is not waited for: the provider's error is raised at once.
        read_timeout: httpx2's per-read inactivity timeout for a client the model creates.
        connect_timeout: httpx2's connect timeout for a client the model creates.
        interrupt_grace: how long the INTERRUPTED partial response may take to be emitted
            after a cancellation (a shielded, bounded emission).
        max_event_size: the largest single streamed event (SSE) or line (NDJSON), in
            characters; a bigger one fails the call with a
            :class:`~trioagent.exception.ModelStreamError` (not retried) instead of being
            buffered without bound.  ``None``: no limit.

    Every :class:`~trioagent.exception.ModelError` a call raises names the model:
    ``exc.provider`` (:attr:`provider`), ``exc.model`` and ``exc.endpoint`` are set, and
    ``str(exc)`` starts with them.

    Providers take the options after ``formatter`` as ``**options:
    Unpack[ChatModelOptions]`` (same names, same defaults, same effect); they set their own
    default ``credential``, ``context_size`` and ``formatter``.
    """

    type: ClassVar[str] = "chat_model"
    #: The provider's name in error messages (default: :attr:`type` without ``_chat``).
    provider_name: ClassVar[str] = ""
    #: Extra request-body keys of every call (see :meth:`_with_request_keys`).
    _request_keys: JSONObject = {}  # noqa: RUF012 - never mutated: copies replace it

    def __init__(
        self,
        model: str,
        *,
        credential: CredentialBase | None = None,
        stream: bool = True,
        max_retries: int = 3,
        retry_delay: float = 1.0,
        max_retry_delay: float = 30.0,
        context_size: int = 32768,
        formatter: FormatterBase | None = None,
        http_client: httpx2.AsyncClient | None = None,
        timeout: float | None = None,
        read_timeout: float | None = 120.0,
        connect_timeout: float | None = 10.0,
        interrupt_grace: float = 5.0,
        max_event_size: int | None = DEFAULT_MAX_EVENT_SIZE,
    ) -> None:
        if max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        if retry_delay < 0 or max_retry_delay < 0:
            raise ValueError("retry_delay and max_retry_delay must be >= 0")
        if timeout is not None and timeout <= 0:
            raise ValueError("timeout must be > 0 or None")
        if max_event_size is not None and max_event_size <= 0:
            raise ValueError("max_event_size must be > 0 or None")
        self.model = model
        self.credential = credential
        #: Whether calls stream (the constructor's ``stream``).
        self.streaming = stream
        self.max_retries = max_retries
        self.retry_delay = retry_delay
        self.max_retry_delay = max_retry_delay
        self.context_size = context_size
        self.formatter = formatter
        self.timeout = timeout
        self.read_timeout = read_timeout
        self.connect_timeout = connect_timeout
        self.interrupt_grace = interrupt_grace
        self.max_event_size = max_event_size
        self._set_http_client(http_client)

    @property
    def provider(self) -> str:
        """The provider's name, as errors give it (``"openai"``, ``"anthropic"``, ...)."""
        return self.provider_name or self.type.removesuffix("_chat").replace("_", "-")

    def _endpoint(self) -> str | None:
        """The URL a call goes to, for error messages (``None``: no HTTP endpoint).

        Providers return it without credentials or query string.
        """
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, stream={self.streaming!r})"

    # -- provider hooks ----------------------------------------------------------------------

    async def _stream_api(
        self,
        messages: list[Msg],
        tools: list[JSONObject] | None,
        tool_choice: ToolChoice | None,
        emit: ChunkSink,
    ) -> None:
        """Stream one call: pass delta chunks to ``emit`` (``is_last=False``; carriers
        allowed).

        Return when the stream ended properly; raise (a
        :class:`~trioagent.exception.ModelError` for provider failures) otherwise.  Runs in
        the task that runs the call (the caller's; a :meth:`stream` block's reader task):
        ``await emit(chunk)`` returns once the chunk was absorbed (and passed on), so an
        error or cancellation of the consumer can surface there; let it propagate (close the
        response on the way out).
        """
        raise NotImplementedError(f"{type(self).__name__} does not implement streaming")

    async def _call_api(
        self,
        messages: list[Msg],
        tools: list[JSONObject] | None,
        tool_choice: ToolChoice | None,
    ) -> ChatResponse:
        """Make one non-streaming call and return the complete response."""
        raise NotImplementedError(f"{type(self).__name__} does not implement non-streaming calls")

    def _get_disable_thinking_kwargs(self) -> JSONObject:
        """Request-body keys that turn thinking off (structured output's ``no_think`` step)."""
        return {}

    def _is_structured_output_fallback_error(self, exc: Exception) -> bool:
        """Whether a provider error means "this request shape was rejected" (HTTP 400)."""
        return isinstance(exc, ModelInvalidRequestError) and exc.status_code == 400

    def _call_kwargs(self) -> JSONObject:
        """Extra request-body keys of this call (a copy; structured output's
        disable-thinking step sets them on a copy of the model made for that call)."""
        return dict(self._request_keys)

    def _with_request_keys(self, keys: JSONObject) -> Self:
        """A shallow copy of this model whose requests also carry ``keys`` (for one call:
        it shares this model's HTTP client and never closes it)."""
        clone = copy.copy(self)
        clone._request_keys = {**self._request_keys, **keys}
        return clone

    def _redact(self, text: str) -> str:
        """``text`` with the credential's secret replaced by ``***`` (for error messages)."""
        if self.credential is not None:
            return self.credential.redact(text)
        return text

    def _redact_error(self, exc: ModelError) -> None:
        """Redact a provider error's message and code in place, before it is logged or raised.

        Providers redact the provider text they quote; this is the safety net for any that
        does not (the call is the one place every provider error passes through, and its
        message reaches logs and ``ReplyEndEvent.error``).
        """
        if self.credential is None:
            return
        exc.message = self._redact(exc.message)
        if exc.code:
            exc.code = self._redact(exc.code)
        exc.args = tuple(self._redact(a) if isinstance(a, str) else a for a in exc.args)

    def _locate_error(self, exc: ModelError) -> None:
        """Name this model in ``exc``: its provider, model name and endpoint (an endpoint the
        HTTP layer set is kept; it is the URL actually called)."""
        exc.provider = exc.provider or self.provider
        exc.model = exc.model or self.model
        if exc.endpoint is None:
            try:
                endpoint = self._endpoint()
            except Exception:  # a misconfigured credential: the error says more than the URL
                endpoint = None
            exc.endpoint = endpoint
        if exc.endpoint is not None:
            exc.endpoint = self._redact(exc.endpoint)

    # -- the call ----------------------------------------------------------------------------

    async def __call__(
        self,
        messages: list[Msg],
        tools: list[JSONObject] | None = None,
        tool_choice: ToolChoice | None = None,
        emit: Emit[ChatResponse] | None = None,
    ) -> ChatResponse:
        """Call the model and return its complete ``is_last=True`` response.

        Args:
            messages: the conversation.
            tools: OpenAI-style tool schemas (``{"type": "function", "function": {...}}``).
            tool_choice: how the model may use the tools (validated against ``tools``).
            emit: receives each non-empty streamed delta; on cancellation, the INTERRUPTED
                partial response.

        Raises:
            ValueError: ``tool_choice`` names a tool that is not in ``tools``.
            ModelError: the provider failed (after the retries it allows).
            ModelTimeoutError: the total ``timeout`` passed.
            trio.Cancelled: the call was cancelled (after ``emit`` got the partial response).
        """
        if tool_choice is not None and tools:
            self._validate_tool_choice(tool_choice, tools)
        call = _Call(list(messages), tools, tool_choice, emit)
        try:
            return await self._run_call(call)
        except trio.Cancelled:
            await self._emit_interrupted(call)
            raise

    def stream(
        self,
        messages: list[Msg],
        tools: list[JSONObject] | None = None,
        tool_choice: ToolChoice | None = None,
        *,
        buffer_size: int = 16,
    ) -> ModelStream:
        """Pull a call: ``async with model.stream(messages, tools) as chunks:``.

        The call runs in a reader task of a nursery owned by the block; ``async for chunk in
        chunks`` yields its deltas (coalesced when the puller lags behind ``buffer_size``
        waiting ones), then the complete response.  Leaving the block early or cancelling it
        ends the call with the INTERRUPTED partial in ``chunks.response``.  See
        :class:`~trioagent.model.ModelStream`.

        Raises:
            ValueError: ``tool_choice`` names a tool that is not in ``tools``.
        """
        if tool_choice is not None and tools:
            self._validate_tool_choice(tool_choice, tools)
        return ModelStream(self, messages, tools, tool_choice, buffer_size=buffer_size)

    async def _emit_interrupted(self, call: _Call) -> None:
        if call.emit is None:
            return
        partial = call.acc.build(FinishedReason.INTERRUPTED)
        # Shielded so the partial response reaches the consumer although the call is
        # cancelled; deadline: ``self.interrupt_grace`` seconds, so a stuck consumer cannot
        # hold a cancelled caller forever.
        with trio.CancelScope(shield=True, deadline=trio.current_time() + self.interrupt_grace):
            await call.emit(partial)

    async def _run_call(self, call: _Call) -> ChatResponse:
        """The retry loop inside the total deadline (no INTERRUPTED handling).

        A timeout that fires while a provider error is being retried (during the backoff, or
        the retried attempt) names that error and has it as ``__cause__``: "timed out" alone
        would hide why the call needed retries.
        """
        try:
            return await self._call_within_deadline(call)
        except ModelError as exc:
            self._redact_error(exc)
            self._locate_error(exc)
            raise

    async def _call_within_deadline(self, call: _Call) -> ChatResponse:
        if self.timeout is None:
            return await self._call_with_retries(call)
        call.deadline = trio.current_time() + self.timeout
        try:
            with trio.fail_at(call.deadline):
                return await self._call_with_retries(call)
        except trio.TooSlowError:
            message = f"the call did not finish within its total timeout of {self.timeout}s"
            if call.retrying is not None:
                message += f" while retrying after the provider error: {call.retrying.detail}"
            raise ModelTimeoutError(message, retryable=False) from call.retrying

    async def _call_with_retries(self, call: _Call) -> ChatResponse:
        attempt = 0
        while True:
            call.acc = StreamAccumulator()
            call.final = None
            try:
                if self.streaming:
                    return _mark_truncation(await self._stream_once(call))
                response = await self._call_api(call.messages, call.tools, call.tool_choice)
                response.is_last = True
                return _mark_truncation(response)
            except ModelError as exc:
                self._redact_error(exc)
                self._locate_error(exc)
                if not exc.retryable or attempt >= self.max_retries or call.acc.has_content:
                    raise
                delay = self._retry_delay_for(attempt, exc)
                if (
                    exc.retry_after is not None
                    and call.deadline is not None
                    and trio.current_time() + delay >= call.deadline
                ):
                    # The provider asked to wait past the total deadline: a retry could only
                    # time out, so its own error is the more useful answer, and now.
                    logger.info(
                        "model %r failed: %s; not retried: Retry-After %.2fs is past the "
                        "total timeout",
                        self.model,
                        exc,
                        delay,
                    )
                    raise
                call.retrying = exc
                # INFO, not WARNING: a retried error is handled; if the retries run out, the
                # error itself reaches the caller.
                logger.info(
                    "model %r failed: %s; retry %d of %d in %.2fs",
                    self.model,
                    exc,
                    attempt + 1,
                    self.max_retries,
                    delay,
                )
            attempt += 1
            await trio.sleep(delay)  # a plain checkpoint: cancelling the call interrupts it

    def _retry_delay_for(self, attempt: int, exc: ModelError) -> float:
        """Capped exponential backoff with jitter, or the provider's ``Retry-After``."""
        return backoff_delay(
            attempt,
            retry_delay=self.retry_delay,
            max_retry_delay=self.max_retry_delay,
            retry_after=exc.retry_after,
        )

    async def _stream_once(self, call: _Call) -> ChatResponse:
        """One streamed attempt: the provider's stream feeds the accumulator in this task.

        No reader task: each delta the provider sends is absorbed (and emitted) before its
        stream reads on, so a delta costs no task switch, and the stream's socket reads are
        its schedule points.  A provider error propagates as raised; a cancellation lands in
        whatever the call awaits (a read or the consumer), and the provider's stream closes
        its response on the way out either way.
        """
        # A schedule point as the stream starts and one as it ends, whatever the provider
        # does in between: a call can be cancelled before its request and after its last
        # delta, also when the provider's stream never blocks.
        await trio.lowlevel.checkpoint()
        try:
            await self._stream_api(call.messages, call.tools, call.tool_choice, call.absorb)
        except BaseExceptionGroup as group:  # a nursery inside the provider's transport
            reraise_unwrapped(group)
        await trio.lowlevel.checkpoint()
        if call.final is not None:
            return call.final
        return call.acc.build()

    # -- tool choice -----------------------------------------------------------------------

    @staticmethod
    def _validate_tool_choice(tool_choice: ToolChoice, tools: list[JSONObject]) -> None:
        """Check that ``tool_choice`` only names tools that exist in ``tools``."""
        available = [t.get("function", {}).get("name") for t in tools]
        names = sorted(str(n) for n in available if n)
        if tool_choice.tools is not None:
            for name in tool_choice.tools:
                if name not in available:
                    raise ValueError(
                        f"Invalid tool name '{name}' in tool_choice.tools. "
                        f"Available tools: {', '.join(names)}"
                    )
        mode = tool_choice.mode
        if mode not in _LITERAL_MODES:
            scope = tool_choice.tools if tool_choice.tools else available
            if mode not in scope:
                if tool_choice.tools is not None:
                    hint = (
                        "Available tools in tool_choice.tools: "
                        f"{', '.join(sorted(tool_choice.tools))}"
                    )
                else:
                    hint = f"Available tools: {', '.join(names)}"
                raise ValueError(f"Invalid tool name '{mode}' in tool_choice.mode. {hint}")

    # -- token counting ------------------------------------------------------------------------

    async def count_tokens(self, messages: list[Msg], tools: list[JSONObject] | None = None) -> int:
        """Estimate the input size in tokens: UTF-8 bytes / 4, plus 2000 per data block.

        Counts text, thinking, hint, tool-call input and tool-result text, and the JSON of the
        tool schemas.  Providers may override it with a real tokenizer.
        """
        texts: list[str] = []
        data_blocks = 0
        for msg in messages:
            for block in msg.content:
                match block:
                    case TextBlock():
                        texts.append(block.text)
                    case ThinkingBlock():
                        texts.append(block.thinking)
                    case ToolCallBlock():
                        texts.append(block.input)
                    case DataBlock():
                        data_blocks += 1
                    case HintBlock(hint=str() as hint) | ToolResultBlock(output=str() as hint):
                        texts.append(hint)
                    case HintBlock(hint=list() as items) | ToolResultBlock(output=list() as items):
                        for item in items:
                            if isinstance(item, TextBlock):
                                texts.append(item.text)
                            else:
                                data_blocks += 1
        if tools:
            texts.append(json.dumps(tools, ensure_ascii=False))
        size = len("".join(texts).encode("utf-8"))
        return int(size / 4 + 0.5) + _DATA_BLOCK_TOKENS * data_blocks

    # -- structured output ---------------------------------------------------------------------

    async def generate_structured_output(
        self,
        messages: list[Msg],
        structured_model: JSONObject | builtins.type[StructuredModel],
        *,
        tool_choice: ToolChoice | None = None,
    ) -> StructuredResponse:
        """Make the model produce a JSON object matching a schema.

        ``structured_model`` is a JSON-schema dict or a pydantic-like class.  The model is
        asked to call a ``generate_structured_output`` tool whose parameters are the schema;
        its arguments are repaired (:func:`~trioagent.model.json_loads_with_repair`) and
        validated.  Strategies, best first: a forced tool choice, ``auto``, forced with
        thinking disabled (only for providers with a thinking switch), no tool choice.  A
        strategy failing with :class:`~trioagent.exception.StructuredOutputError` or an HTTP
        400 moves to the next; other errors propagate at once.  An explicit ``tool_choice`` is
        used alone.  Nothing is emitted; cancellation propagates.
        """

        async def call(
            prompt: list[Msg], tools: list[JSONObject], choice: ToolChoice | None, keys: JSONObject
        ) -> ChatResponse:
            model = self._with_request_keys(keys) if keys else self
            return await model._run_call(_Call(prompt, tools, choice, None))

        return await generate_structured_output(
            messages,
            structured_model,
            tool_choice=tool_choice,
            model=self.model,
            call=call,
            disable_thinking=self._get_disable_thinking_kwargs(),
            is_fallback_error=self._is_structured_output_fallback_error,
        )


def _mark_truncation(response: ChatResponse) -> ChatResponse:
    """``response`` marked ``MAX_TOKENS`` or ``CONTENT_FILTER`` when the provider's reason (in
    its metadata) says it was cut off at the output limit or stopped by a content filter."""
    if response.finished_reason == FinishedReason.COMPLETED:
        response.finished_reason = finished_reason_of(response.metadata)
    return response
