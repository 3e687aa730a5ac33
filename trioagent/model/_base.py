"""``ChatModelBase``: the provider-independent half of every chat model.

A provider implements two hooks — :meth:`ChatModelBase._stream_api` (send delta chunks over a
memory channel) and :meth:`ChatModelBase._call_api` (return one complete response) — and the
base class does the rest: tool-choice validation, the reader task and the streaming
accumulator, retries with capped exponential backoff, the total deadline, and the
INTERRUPTED partial response on cancellation.

Calling a model::

    response = await model(messages, tools, tool_choice, emit=on_chunk)

``on_chunk`` receives every non-empty delta (``is_last=False``); the complete response
(``is_last=True``) is returned, not emitted.  If the call is cancelled, ``on_chunk`` receives
the partial response accumulated so far with ``finished_reason=INTERRUPTED`` and
``is_last=True``, and ``trio.Cancelled`` propagates.
"""

from __future__ import annotations

import builtins
import contextvars
import copy
import json
import logging
import random
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypedDict

import attrs
import httpx
import jsonschema
import trio

from .._core.concurrency import reraise_unwrapped
from .._core.ids import generate_id, generate_timestamp
from .._json_repair import json_loads_with_repair
from ..exception import (
    ModelError,
    ModelInvalidRequestError,
    ModelTimeoutError,
    StructuredOutputError,
    ToolJSONDecodeError,
)
from ..message import (
    DataBlock,
    HintBlock,
    Msg,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    UserMsg,
)
from ..types import FinishedReason, ToolChoice
from ._accumulator import StreamAccumulator
from ._http import HTTPClientOwner
from ._response import ChatResponse, ChatUsage

if TYPE_CHECKING:
    from ..credential import CredentialBase
    from ..formatter import FormatterBase

__all__ = [
    "ChatModelBase",
    "ChatModelOptions",
    "Emit",
    "StructuredResponse",
    "in_range",
    "one_of",
    "positive_or_none",
    "select_tools",
]

logger = logging.getLogger("trioagent.model")

#: The callback a model call passes its streamed chunks to.
Emit = Callable[[ChatResponse], Awaitable[None]]

_LITERAL_MODES = frozenset({"auto", "none", "required"})
_DATA_BLOCK_TOKENS = 2000
_STRUCTURED_TOOL = "generate_structured_output"
_STRUCTURED_REMINDER = (
    "<system-reminder>Now you **MUST** call the tool named 'generate_structured_output' to "
    "generate the structured output required by the user. DON'T do anything else."
    "</system-reminder>"
)

#: Extra request-body keys for the current call (the structured-output ``no_think`` strategy
#: sets the provider's disable-thinking kwargs here; providers merge them into the body).
_CALL_KWARGS: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "trioagent_model_call_kwargs", default=None
)


#: Chunks the provider's reader may parse ahead of the accumulator (bounded backpressure).
_STREAM_BUFFER = 64
#: The largest backoff exponent used: ``2.0**1024`` overflows a float, and any realistic
#: ``retry_delay`` times ``2**1000`` is far past any ``max_retry_delay`` anyway.
_MAX_BACKOFF_EXPONENT = 1000


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
    http_client: httpx.AsyncClient | None
    timeout: float | None
    read_timeout: float | None
    connect_timeout: float | None
    interrupt_grace: float


# -- generation-parameter validators (attrs) --------------------------------------------------

_Validator = Callable[[Any, "attrs.Attribute[Any]", Any], None]


def in_range(
    low: float, high: float, *, low_open: bool = False, high_open: bool = False
) -> _Validator:
    """An attrs validator: ``None`` or a number within the interval."""

    def check(instance: Any, attribute: attrs.Attribute[Any], value: float | None) -> None:
        if value is None:
            return
        ok_low = value > low if low_open else value >= low
        ok_high = value < high if high_open else value <= high
        if not (ok_low and ok_high):
            interval = f"{'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"
            raise ValueError(f"{attribute.name} must be in {interval}, got {value}")

    return check


def positive_or_none(instance: Any, attribute: attrs.Attribute[Any], value: int | None) -> None:
    """An attrs validator: ``None`` or an integer > 0."""
    if value is not None and value <= 0:
        raise ValueError(f"{attribute.name} must be > 0, got {value}")


def one_of(*choices: str) -> _Validator:
    """An attrs validator: ``None`` or one of ``choices``."""

    def check(instance: Any, attribute: attrs.Attribute[Any], value: str | None) -> None:
        if value is not None and value not in choices:
            raise ValueError(f"{attribute.name} must be one of {', '.join(choices)}, got {value!r}")

    return check


def select_tools(
    tools: list[dict[str, Any]] | None, tool_choice: ToolChoice | None
) -> list[dict[str, Any]] | None:
    """``tools`` (OpenAI-style schemas) restricted to ``tool_choice.tools`` when that is set."""
    if tools and tool_choice is not None and tool_choice.tools:
        allowed = set(tool_choice.tools)
        return [t for t in tools if t.get("function", {}).get("name") in allowed]
    return tools


class StructuredModel(Protocol):
    """A pydantic-like class: ``model_json_schema()`` and ``model_validate(obj)``."""

    @classmethod
    def model_json_schema(cls) -> dict[str, Any]: ...

    @classmethod
    def model_validate(cls, obj: Any) -> Any: ...


@attrs.define(kw_only=True)
class StructuredResponse:
    """The result of :meth:`ChatModelBase.generate_structured_output`."""

    type: ClassVar[str] = "structured_response"
    content: dict[str, Any]
    id: str = attrs.field(factory=generate_id)
    created_at: str = attrs.field(factory=generate_timestamp)
    usage: ChatUsage | None = None
    metadata: dict[str, Any] = attrs.field(factory=dict)
    finished_reason: FinishedReason = attrs.field(
        default=FinishedReason.COMPLETED, converter=FinishedReason
    )


@attrs.define(eq=False)
class _Call:
    """The state of one model call, shared by the retry loop and the cancellation handler."""

    messages: list[Msg]
    tools: list[dict[str, Any]] | None
    tool_choice: ToolChoice | None
    emit: Emit | None
    acc: StreamAccumulator = attrs.Factory(StreamAccumulator)
    final: ChatResponse | None = None
    #: When the total ``timeout`` fires (trio time), if the model has one.
    deadline: float | None = None
    #: The last retryable provider error, being retried (named by a total-timeout error).
    retrying: ModelError | None = None

    async def absorb(self, chunk: ChatResponse) -> None:
        """Accumulate one chunk from the provider; pass non-empty deltas to ``emit``."""
        if chunk.is_last:
            # A provider-built final replaces the synthesized one (reference behaviour).
            self.final = chunk
            return
        self.acc.add(chunk)
        if chunk.content and self.emit is not None:
            await self.emit(chunk)


@attrs.define(eq=False)
class _ReaderOutcome:
    error: Exception | None = None


class ChatModelBase(HTTPClientOwner):
    """Base class of chat models.

    Args:
        model: the provider's model name.
        credential: API key and base URL (``None``: the provider's credential class reads its
            environment variables).
        stream: stream the answer (deltas go to ``emit``) or make one plain request.
        max_retries: how many times a retryable provider error (429, 5xx, connection errors,
            timeouts) is retried — only while no content has arrived yet.
        retry_delay: the first backoff delay in seconds; doubled per retry, with jitter.
        max_retry_delay: cap for one backoff delay and for a provider's ``Retry-After``.
        context_size: the context window, used by context compression.
        formatter: turns messages into the provider's format (providers set a default).
        http_client: an ``httpx.AsyncClient`` to use; the model never closes a client it was
            given.  Without one the model creates its own on first use; :meth:`aclose` (or
            ``async with model:``) closes it.
        timeout: total deadline of one call in seconds, retries included
            (:class:`~trioagent.exception.ModelTimeoutError` when exceeded, naming the provider
            error being retried, if any); ``None`` = none.  A ``Retry-After`` that would end
            past it is not waited for: the provider's error is raised at once.
        read_timeout: httpx's per-read inactivity timeout for a client the model creates.
        connect_timeout: httpx's connect timeout for a client the model creates.
        interrupt_grace: how long the INTERRUPTED partial response may take to be emitted
            after a cancellation (a shielded, bounded emission).

    Providers take the options after ``formatter`` as ``**options:
    Unpack[ChatModelOptions]`` (same names, same defaults, same effect); they set their own
    default ``credential``, ``context_size`` and ``formatter``.
    """

    type: ClassVar[str] = "chat_model"

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
        http_client: httpx.AsyncClient | None = None,
        timeout: float | None = None,
        read_timeout: float | None = 120.0,
        connect_timeout: float | None = 10.0,
        interrupt_grace: float = 5.0,
    ) -> None:
        if max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        if retry_delay < 0 or max_retry_delay < 0:
            raise ValueError("retry_delay and max_retry_delay must be >= 0")
        if timeout is not None and timeout <= 0:
            raise ValueError("timeout must be > 0 or None")
        self.model = model
        self.credential = credential
        self.stream = stream
        self.max_retries = max_retries
        self.retry_delay = retry_delay
        self.max_retry_delay = max_retry_delay
        self.context_size = context_size
        self.formatter = formatter
        self.timeout = timeout
        self.read_timeout = read_timeout
        self.connect_timeout = connect_timeout
        self.interrupt_grace = interrupt_grace
        self._set_http_client(http_client)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, stream={self.stream!r})"

    # -- provider hooks ----------------------------------------------------------------------

    async def _stream_api(
        self,
        messages: list[Msg],
        tools: list[dict[str, Any]] | None,
        tool_choice: ToolChoice | None,
        send: trio.MemorySendChannel[ChatResponse],
    ) -> None:
        """Stream one call: send delta chunks (``is_last=False``; carriers allowed).

        Return when the stream ended properly; raise (a
        :class:`~trioagent.exception.ModelError` for provider failures) otherwise.  Runs in a
        reader task owned by the call; the channel is closed by the caller.
        """
        raise NotImplementedError(f"{type(self).__name__} does not implement streaming")

    async def _call_api(
        self,
        messages: list[Msg],
        tools: list[dict[str, Any]] | None,
        tool_choice: ToolChoice | None,
    ) -> ChatResponse:
        """Make one non-streaming call and return the complete response."""
        raise NotImplementedError(f"{type(self).__name__} does not implement non-streaming calls")

    def _get_disable_thinking_kwargs(self) -> dict[str, Any]:
        """Request-body keys that turn thinking off (structured output's ``no_think`` step)."""
        return {}

    def _is_structured_output_fallback_error(self, exc: Exception) -> bool:
        """Whether a provider error means "this request shape was rejected" (HTTP 400)."""
        return isinstance(exc, ModelInvalidRequestError) and exc.status_code == 400

    @staticmethod
    def _call_kwargs() -> dict[str, Any]:
        """Extra request-body keys set for the current call (see ``_CALL_KWARGS``)."""
        return dict(_CALL_KWARGS.get() or {})

    def _body_overrides(
        self, extra_body: dict[str, Any] | None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """(extra body, other per-call keys) for the current call.

        A per-call ``extra_body`` (structured output's disable-thinking step, say) replaces
        the model's ``extra_body`` as a whole.  (The OpenAI-compatible providers merge the two
        key by key instead: ``OpenAICompatibleChatModel._split_call_kwargs``.)
        """
        call_kwargs = self._call_kwargs()
        extra = call_kwargs.pop("extra_body", extra_body)
        return dict(extra or {}), call_kwargs

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

    # -- the call ----------------------------------------------------------------------------

    async def __call__(
        self,
        messages: list[Msg],
        tools: list[dict[str, Any]] | None = None,
        tool_choice: ToolChoice | None = None,
        emit: Emit | None = None,
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
        if self.timeout is None:
            return await self._call_with_retries(call)
        call.deadline = trio.current_time() + self.timeout
        try:
            with trio.fail_at(call.deadline):
                return await self._call_with_retries(call)
        except trio.TooSlowError:
            message = (
                f"model call to {self.model!r} did not finish within its total timeout of "
                f"{self.timeout}s"
            )
            if call.retrying is not None:
                message += f" while retrying after the provider error: {call.retrying}"
            raise ModelTimeoutError(message, retryable=False) from call.retrying

    async def _call_with_retries(self, call: _Call) -> ChatResponse:
        attempt = 0
        while True:
            call.acc = StreamAccumulator()
            call.final = None
            try:
                if self.stream:
                    return await self._stream_once(call)
                response = await self._call_api(call.messages, call.tools, call.tool_choice)
                response.is_last = True
                return response
            except ModelError as exc:
                self._redact_error(exc)
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
                logger.warning(
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
        """Capped exponential backoff with jitter, or the provider's ``Retry-After``.

        The exponent is bounded before the power is taken (``2.0**1024`` raises
        ``OverflowError``); a product that overflows to ``inf`` is then capped.
        """
        if exc.retry_after is not None:
            return max(0.0, min(exc.retry_after, self.max_retry_delay))
        base = self.retry_delay * 2.0 ** min(attempt, _MAX_BACKOFF_EXPONENT)
        return min(self.max_retry_delay, base * random.uniform(1.0, 1.25))

    async def _stream_once(self, call: _Call) -> ChatResponse:
        """One streamed attempt: the provider's reader task feeds the accumulator."""
        send, receive = trio.open_memory_channel[ChatResponse](_STREAM_BUFFER)
        outcome = _ReaderOutcome()
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._read_stream, call, send, outcome)
                async with receive:
                    async for chunk in receive:
                        await call.absorb(chunk)
                        # Take what the reader already parsed without a scheduling round per
                        # chunk (an SSE read often carries many events).
                        for _ in range(_STREAM_BUFFER):
                            try:
                                chunk = receive.receive_nowait()
                            except (trio.WouldBlock, trio.EndOfChannel):
                                break
                            await call.absorb(chunk)
        except BaseExceptionGroup as group:
            reraise_unwrapped(group)
        if outcome.error is not None:
            raise outcome.error
        if call.final is not None:
            return call.final
        return call.acc.build()

    async def _read_stream(
        self,
        call: _Call,
        send: trio.MemorySendChannel[ChatResponse],
        outcome: _ReaderOutcome,
    ) -> None:
        """The reader task: runs the provider stream; its error is handed to the call."""
        async with send:
            try:
                await self._stream_api(call.messages, call.tools, call.tool_choice, send)
            except Exception as exc:  # re-raised by _stream_once in the call's own task
                outcome.error = exc

    # -- tool choice -----------------------------------------------------------------------

    @staticmethod
    def _validate_tool_choice(tool_choice: ToolChoice, tools: list[dict[str, Any]]) -> None:
        """Check that ``tool_choice`` only names tools that exist (reference §1.5)."""
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

    async def count_tokens(
        self, messages: list[Msg], tools: list[dict[str, Any]] | None = None
    ) -> int:
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
        structured_model: dict[str, Any] | builtins.type[StructuredModel],
        *,
        tool_choice: ToolChoice | None = None,
    ) -> StructuredResponse:
        """Make the model produce a JSON object matching a schema (reference §1.6).

        ``structured_model`` is a JSON-schema dict or a pydantic-like class.  The model is
        asked to call a ``generate_structured_output`` tool whose parameters are the schema;
        its arguments are repaired (:func:`json_loads_with_repair`) and validated.  Strategies,
        best first: a forced tool choice, ``auto``, forced with thinking disabled (only for
        providers with a thinking switch), no tool choice.  A strategy failing with
        :class:`~trioagent.exception.StructuredOutputError` or an HTTP 400 moves to the next;
        other errors propagate at once.  An explicit ``tool_choice`` is used alone.  Nothing
        is emitted; cancellation propagates.
        """
        if not messages:
            raise ValueError("generate_structured_output needs at least one message")
        if isinstance(structured_model, dict):
            schema = structured_model
        elif hasattr(structured_model, "model_json_schema"):
            schema = structured_model.model_json_schema()
        else:
            raise TypeError(
                "structured_model must be a JSON-schema dict or a class with "
                f"model_json_schema(), got {structured_model!r}"
            )
        forced = ToolChoice(mode=_STRUCTURED_TOOL)
        strategies: list[tuple[str, dict[str, Any], ToolChoice | None]]
        if tool_choice is not None:
            strategies = [("explicit", {}, tool_choice)]
        else:
            strategies = [("forced", {}, forced), ("auto", {}, ToolChoice(mode="auto"))]
            if no_think := self._get_disable_thinking_kwargs():
                strategies.append(("no_think", no_think, forced))
            strategies.append(("none", {}, None))

        prompt = copy.deepcopy(list(messages))
        if prompt[-1].role == "user":
            prompt[-1].content = [*prompt[-1].content, TextBlock(text=_STRUCTURED_REMINDER)]
        else:
            prompt.append(UserMsg("user", _STRUCTURED_REMINDER))
        tools = [
            {
                "type": "function",
                "function": {
                    "name": _STRUCTURED_TOOL,
                    "description": (
                        "Call this function to generate structured output required by the user."
                    ),
                    "parameters": schema,
                },
            }
        ]

        first_error: Exception | None = None
        last_error: Exception | None = None
        for name, extra, choice in strategies:
            token = _CALL_KWARGS.set({**(_CALL_KWARGS.get() or {}), **extra})
            try:
                response = await self._run_call(_Call(prompt, tools, choice, None))
                result = self._parse_structured(response, schema, structured_model)
            except Exception as exc:
                first_error = first_error or exc
                last_error = exc
                if isinstance(exc, StructuredOutputError) or (
                    isinstance(exc, ModelError) and self._is_structured_output_fallback_error(exc)
                ):
                    logger.debug("structured output strategy %r failed: %s", name, exc)
                    continue
                raise
            finally:
                _CALL_KWARGS.reset(token)
            if name not in ("forced", "explicit"):
                logger.info("structured output for %r used strategy %r", self.model, name)
            return result
        assert last_error is not None
        if first_error is not None and first_error is not last_error:
            raise last_error from first_error
        raise last_error

    def _parse_structured(
        self,
        response: ChatResponse,
        schema: dict[str, Any],
        structured_model: dict[str, Any] | builtins.type[StructuredModel],
    ) -> StructuredResponse:
        call = next(
            (
                b
                for b in response.content
                if isinstance(b, ToolCallBlock) and b.name == _STRUCTURED_TOOL
            ),
            None,
        )
        if call is None:
            raise StructuredOutputError(
                f"model {self.model!r} did not call the {_STRUCTURED_TOOL!r} tool"
            )
        try:
            output = json_loads_with_repair(call.input, schema)
            if isinstance(structured_model, dict):
                jsonschema.validate(output, structured_model)
            else:
                structured_model.model_validate(output)
        except (ToolJSONDecodeError, jsonschema.ValidationError, ValueError) as exc:
            raise StructuredOutputError(
                f"invalid structured output from model {self.model!r}: {exc}"
            ) from exc
        return StructuredResponse(
            content=output,
            id=response.id,
            created_at=response.created_at,
            usage=response.usage,
            finished_reason=response.finished_reason,
        )
