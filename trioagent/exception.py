"""Exceptions of the library.

:class:`TrioagentError` is the root of every exception trioagent defines: ``except
TrioagentError`` catches whatever the library raises for a failure (see docs/errors.md for
the hierarchy and the few builtins raised for a misuse of the API).  Under it, two families,
as in AgentScope:

* :class:`AgentOrientedException` — errors meant for the model to read (a tool that does not
  exist, arguments that are not JSON, ...).  They become error tool results, never a crashed
  reply.  ``str(exc)`` is ``"ClassName: message"``.
* :class:`DeveloperOrientedException` — errors meant for the developer; they end the reply with
  ``ReplyEndEvent(ERROR)`` and propagate.

Model-layer errors (:class:`ModelError` and subclasses) carry the HTTP status, the provider's
error code and message, whether the model layer may retry them, and the :class:`ErrorType`
reported in the end event.
"""

from __future__ import annotations

from typing import Any

import trio

from .types import ErrorInfo, ErrorType

__all__ = [
    "AgentOrientedException",
    "DeveloperOrientedException",
    "MissingExtraError",
    "ModelAuthenticationError",
    "ModelConnectionError",
    "ModelCredentialError",
    "ModelError",
    "ModelInvalidRequestError",
    "ModelPermissionError",
    "ModelRateLimitError",
    "ModelStreamError",
    "ModelTimeoutError",
    "ModelUpstreamError",
    "ReplyInterruptedError",
    "StructuredOutputError",
    "ToolGroupInactiveError",
    "ToolInputValidationError",
    "ToolInterruptedError",
    "ToolJSONDecodeError",
    "ToolNotFoundError",
    "ToolWorkerError",
    "TrioagentError",
    "error_info",
]


class TrioagentError(Exception):
    """The root of every exception trioagent defines.

    Some subclasses are also a builtin where that is what callers already catch: a timeout is
    a :class:`TimeoutError`, a malformed serialized state a :class:`ValueError`.
    """


class MissingExtraError(TrioagentError, ImportError):
    """A feature needs an optional dependency that is not installed.

    The message names the feature and the command that installs it (``trioagent.mcp needs
    the 'mcp' extra: pip install 'trioagent[mcp]'``).  Also an :class:`ImportError`, raised
    when the feature is used (at ``import trioagent.mcp``, when a PDF is read, ...), never at
    ``import trioagent``.

    Attributes:
        feature: what needs it (``"trioagent.mcp"``).
        extra: the extra that installs it (``"mcp"``).
        name: the module that could not be imported (as :class:`ImportError`).
    """

    def __init__(self, feature: str, extra: str, *, module: str) -> None:
        super().__init__(
            f"{feature} needs the {extra!r} extra: pip install 'trioagent[{extra}]'", name=module
        )
        self.feature = feature
        self.extra = extra


class AgentOrientedException(TrioagentError):
    """An error the model should read; ``message`` holds the raw text."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return f"{type(self).__name__}: {self.message}"


class ToolNotFoundError(AgentOrientedException):
    """The model called a tool that is not registered."""


class ToolInterruptedError(AgentOrientedException):
    """A tool call was interrupted."""


class ToolJSONDecodeError(AgentOrientedException):
    """Tool arguments that are not JSON, even after repair."""


class ToolGroupInactiveError(AgentOrientedException):
    """The model called a tool of a group that is not active."""


class ToolInputValidationError(AgentOrientedException):
    """Tool arguments that parse as JSON but do not satisfy the tool's input schema."""


class ToolWorkerError(AgentOrientedException):
    """A sync tool's worker process could not run the call (unpicklable arguments or result,
    or the process died without an answer)."""


class DeveloperOrientedException(TrioagentError):
    """An error for the developer: it ends the reply with an ERROR end event and propagates."""


class StructuredOutputError(DeveloperOrientedException):
    """Structured output could not be produced or validated."""


class ReplyInterruptedError(TrioagentError):
    """``agent.reply()`` after ``agent.interrupt()`` when
    ``ReActConfig.interruption_raise_cancelled_error`` is set; ``msg`` is the interrupted Msg."""

    def __init__(self, msg: Any) -> None:
        super().__init__("the reply was interrupted")
        self.msg = msg


class ModelError(TrioagentError):
    """A model call failed.

    Attributes:
        status_code: the HTTP status, when the provider answered.
        code: the provider's error code (``"rate_limit_exceeded"``, ...), when it gave one.
        message: the provider's message (or a description of the transport failure).
        retryable: whether the model layer's own retry loop may try again.
        retry_after: seconds the provider asked to wait (``Retry-After``), when given.
        provider: the provider of the model that failed (``"openai"``), when known.
        model: the model's name, when known.
        endpoint: the URL called, without credentials or query string, when known.

    ``str(exc)`` starts with what is known of the provider, the model and the endpoint
    (``"openai model gpt-4o-mini at https://api.openai.com/v1/chat/completions: HTTP 503
    ..."``): with a fallback model or many agents, the error says which one failed.  The
    chat model sets them on every error it raises; the HTTP layer sets the endpoint.
    """

    error_type: ErrorType = ErrorType.UNKNOWN
    default_retryable: bool = False

    def __init__(
        self,
        message: str,
        *,
        status_code: int | None = None,
        code: str | None = None,
        retryable: bool | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status_code = status_code
        self.code = code
        self.retryable = self.default_retryable if retryable is None else retryable
        self.retry_after = retry_after
        self.provider: str | None = None
        self.model: str | None = None
        self.endpoint: str | None = None

    @property
    def origin(self) -> str:
        """Who failed: ``"<provider> model <model> at <endpoint>"`` (what is known of it)."""
        parts: list[str] = []
        if self.provider:
            parts.append(self.provider)
        if self.model:
            parts.append(f"model {self.model}")
        if self.endpoint:
            parts.append(f"at {self.endpoint}")
        return " ".join(parts)

    @property
    def detail(self) -> str:
        """What failed, without :attr:`origin`: ``"HTTP 503 message (code: c)"``."""
        parts = [self.message]
        if self.status_code is not None:
            parts.insert(0, f"HTTP {self.status_code}")
        if self.code:
            parts.append(f"(code: {self.code})")
        return " ".join(parts)

    def __str__(self) -> str:
        origin = self.origin
        return f"{origin}: {self.detail}" if origin else self.detail


class ModelAuthenticationError(ModelError):
    """401: the key is missing, wrong or revoked."""

    error_type = ErrorType.AUTHENTICATION


class ModelPermissionError(ModelError):
    """403: the key may not use this model or endpoint."""

    error_type = ErrorType.PERMISSION


class ModelRateLimitError(ModelError):
    """429: too many requests or tokens."""

    error_type = ErrorType.RATE_LIMIT
    default_retryable = True


class ModelInvalidRequestError(ModelError):
    """400/404/422: the provider rejected the request; its message says why."""

    error_type = ErrorType.INVALID_REQUEST


class ModelUpstreamError(ModelError):
    """5xx, or an error event inside the stream."""

    error_type = ErrorType.UPSTREAM
    default_retryable = True


class ModelConnectionError(ModelError):
    """The provider could not be reached or dropped the connection."""

    error_type = ErrorType.CONNECTION
    default_retryable = True


class ModelTimeoutError(ModelConnectionError, TimeoutError):
    """A read stalled past the read timeout, or the call passed its total deadline.

    Also a :class:`TimeoutError`, so ``except TimeoutError`` catches it as it catches any
    other timeout.
    """


class ModelCredentialError(ModelError):
    """The credential has no API key: none was passed and its environment variable is unset."""

    error_type = ErrorType.SETUP


class ModelStreamError(ModelError):
    """The stream ended without its terminator, or carried data that cannot be parsed."""

    error_type = ErrorType.UPSTREAM


def error_info(exc: BaseException) -> ErrorInfo:
    """Classify an exception for ``ReplyEndEvent(ERROR)``; never includes secrets."""
    if isinstance(exc, BaseExceptionGroup):
        leaves = [e for e in exc.exceptions if not isinstance(e, trio.Cancelled)]
        if len(leaves) == 1:
            return error_info(leaves[0])
    if isinstance(exc, ModelError):
        return ErrorInfo(
            type=exc.error_type,
            message=str(exc),
            provider=exc.provider,
            model=exc.model,
            endpoint=exc.endpoint,
        )
    if isinstance(exc, MissingExtraError):
        kind = ErrorType.SETUP
    elif isinstance(exc, DeveloperOrientedException | TypeError | ValueError | RuntimeError):
        kind = ErrorType.INTERNAL
    else:
        kind = ErrorType.UNKNOWN
    return ErrorInfo(type=kind, message=f"{type(exc).__name__}: {exc}")
