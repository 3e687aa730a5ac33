"""Testing kit for agents built on trioagent: a scripted model, the cancellation sweep and a
loopback OpenAI-compatible server."""

from ._scripted import (
    ScriptedModel as ScriptedModel,
    ScriptedRequest as ScriptedRequest,
    ScriptError as ScriptError,
    text_chunks as text_chunks,
    thinking_chunks as thinking_chunks,
    tool_call_chunks as tool_call_chunks,
)
from ._server import (
    OpenAICompatibleServer as OpenAICompatibleServer,
    serve_openai_compatible as serve_openai_compatible,
)
from ._server_script import (
    ConnectionRecord as ConnectionRecord,
    RecordedRequest as RecordedRequest,
    RouteHandler as RouteHandler,
    ScriptedError as ScriptedError,
    ScriptedReply as ScriptedReply,
    ScriptedResponse as ScriptedResponse,
    ScriptedSSE as ScriptedSSE,
    ScriptedToolCall as ScriptedToolCall,
    ScriptEntry as ScriptEntry,
)
from ._sweep import (
    CancelMode as CancelMode,
    SweepReport as SweepReport,
    SweepRun as SweepRun,
    SweepViolation as SweepViolation,
    cancel_sweep as cancel_sweep,
    check_nested_rules as check_nested_rules,
    check_reply_rules as check_reply_rules,
)

__all__ = [
    "CancelMode",
    "ConnectionRecord",
    "OpenAICompatibleServer",
    "RecordedRequest",
    "RouteHandler",
    "ScriptEntry",
    "ScriptError",
    "ScriptedError",
    "ScriptedModel",
    "ScriptedReply",
    "ScriptedRequest",
    "ScriptedResponse",
    "ScriptedSSE",
    "ScriptedToolCall",
    "SweepReport",
    "SweepRun",
    "SweepViolation",
    "cancel_sweep",
    "check_nested_rules",
    "check_reply_rules",
    "serve_openai_compatible",
    "text_chunks",
    "thinking_chunks",
    "tool_call_chunks",
]
