"""The HTTP layer every model kind is built on (internal).

Chat models, embedding, speech and classifier models and the Mem0 client all talk to their
providers through this package: sending a request (:func:`send_request`, never following a
redirect), typed errors for HTTP statuses and transport failures (:func:`error_from_response`
and friends), incremental decoding of streamed bodies (:class:`SSEDecoder`,
:func:`read_decoded`, :func:`stream_sse`), the wait before a retry (:func:`backoff_delay`),
and who owns the ``httpx2.AsyncClient`` (:class:`HTTPClientOwner`).  It knows nothing of
messages, formatters or models.
"""

from ._client import HTTPClientOwner as HTTPClientOwner, bearer_headers as bearer_headers
from ._errors import (
    ErrorMapper as ErrorMapper,
    Redact as Redact,
    error_from_payload as error_from_payload,
    error_from_redirect as error_from_redirect,
    error_from_response as error_from_response,
    error_from_transport as error_from_transport,
    excerpt as excerpt,
    identity as identity,
    incomplete_stream_error as incomplete_stream_error,
    located as located,
    parse_retry_after as parse_retry_after,
    safe_url as safe_url,
)
from ._retry import backoff_delay as backoff_delay
from ._send import (
    CLOSE_GRACE as CLOSE_GRACE,
    MAX_BODY_SIZE as MAX_BODY_SIZE,
    RequestBody as RequestBody,
    aclose_response as aclose_response,
    response_json as response_json,
    send_request as send_request,
)
from ._sse import (
    ServerSentEvent as ServerSentEvent,
    SSEDecoder as SSEDecoder,
    too_large_error as too_large_error,
)
from ._stream import (
    DEFAULT_MAX_EVENT_SIZE as DEFAULT_MAX_EVENT_SIZE,
    DRAIN_GRACE as DRAIN_GRACE,
    media_type as media_type,
    not_a_stream_error as not_a_stream_error,
    parse_event as parse_event,
    read_bytes as read_bytes,
    read_decoded as read_decoded,
    read_sse as read_sse,
    stream_sse as stream_sse,
)

__all__ = [
    "CLOSE_GRACE",
    "DEFAULT_MAX_EVENT_SIZE",
    "DRAIN_GRACE",
    "MAX_BODY_SIZE",
    "ErrorMapper",
    "HTTPClientOwner",
    "Redact",
    "RequestBody",
    "SSEDecoder",
    "ServerSentEvent",
    "aclose_response",
    "backoff_delay",
    "bearer_headers",
    "error_from_payload",
    "error_from_redirect",
    "error_from_response",
    "error_from_transport",
    "excerpt",
    "identity",
    "incomplete_stream_error",
    "located",
    "media_type",
    "not_a_stream_error",
    "parse_event",
    "parse_retry_after",
    "read_bytes",
    "read_decoded",
    "read_sse",
    "response_json",
    "safe_url",
    "send_request",
    "stream_sse",
    "too_large_error",
]
