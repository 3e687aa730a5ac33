"""Span attributes for :class:`~trioagent.middleware.TracingMiddleware` (pure functions).

Converts messages, model requests and responses, tool calls and results into the attribute
values of the OpenTelemetry GenAI semantic conventions (with AgentScope's ``agentscope.agent.*``
names for what the conventions do not cover), reads the conventions' content-capture switch,
and scrubs credentials out of every string it records.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import enum
import json
import os
import re
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence

import attrs

from .._core.json_types import JSONObject, JSONValue
from ..message import (
    Base64Source,
    DataBlock,
    Msg,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from ..model import ChatResponse
from ..serialization import unstructure
from ..types import FinishedReason, ToolChoice

__all__ = [
    "CAPTURE_CONTENT_ENV",
    "AttributeValue",
    "Scrubber",
    "agent_description",
    "capture_content_from_env",
    "chat_output_messages",
    "clean_attributes",
    "finish_reason",
    "provider_name",
    "request_attributes",
    "secrets_of",
    "server_address",
    "to_json",
    "to_otel_message",
    "tool_definitions",
]

AttributeValue = str | bool | int | float | Sequence[str]

#: The GenAI conventions' switch for recording message content (prompts, answers, tool
#: arguments and results); off unless set.
CAPTURE_CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
_CAPTURE_ON = frozenset({"true", "1", "yes", "span_only", "span_and_event"})


def capture_content_from_env() -> bool:
    """Whether :data:`CAPTURE_CONTENT_ENV` turns content capture on (``true``, or the newer
    ``SPAN_ONLY`` / ``SPAN_AND_EVENT`` modes; case-insensitive)."""
    return os.environ.get(CAPTURE_CONTENT_ENV, "").strip().lower() in _CAPTURE_ON


# -- credentials -----------------------------------------------------------------------------------

_REDACTED = "***"
# Applied to exception texts only (messages and stack traces): they may quote a request.
_ERROR_PATTERNS = (
    re.compile(r"(?i)(\bbearer\s+)[^\s\"',;]+"),
    # An Authorization value may be "<scheme> <credentials>" (Basic, Token, ...): both go.
    re.compile(
        r"(?i)(\b(?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?)"
        r"[^\s\"',;&]+(?:[ \t]+[^\s\"',;&]+)?"
    ),
    re.compile(
        r"(?i)([\"']?\b(?:x-api-key|api[_-]?key|access[_-]?token|x-goog-api-key)"
        r"[\"']?\s*[:=]\s*[\"']?)[^\s\"',;&]+"
    ),
    re.compile(r"(?i)([?&](?:key|api[_-]?key|access_token|token)=)[^&\s\"']+"),
)


class Scrubber:
    """Replaces known secrets (API keys, URL passwords) in recorded strings with ``***``."""

    __slots__ = ("secrets",)

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        # Longest first, so that a secret containing another one is replaced whole.
        self.secrets = tuple(sorted({s for s in secrets if len(s) >= 4}, key=len, reverse=True))

    def __call__(self, text: str) -> str:
        for secret in self.secrets:
            if secret in text:
                text = text.replace(secret, _REDACTED)
        return text

    def error_text(self, text: str) -> str:
        """``text`` scrubbed of known secrets and of anything that looks like a credential."""
        text = self(text)
        for pattern in _ERROR_PATTERNS:
            text = pattern.sub(lambda m: m.group(1) + _REDACTED, text)
        return text


def secrets_of(models: Iterable[object]) -> list[str]:
    """Every secret the models' credentials may send: API keys and base-URL passwords."""
    found: list[str] = []
    for model in models:
        credential = getattr(model, "credential", None)
        if credential is None:
            continue
        get = getattr(credential, "secrets", None)
        secrets: list[str] | None = None
        if callable(get):
            with contextlib.suppress(Exception):  # a broken credential must not break tracing
                secrets = [str(s) for s in get() if s]
        if secrets is None and isinstance(getattr(credential, "api_key", None), str):
            secrets = [credential.api_key]
        found.extend(secrets or ())
        base_url = getattr(credential, "base_url", None)
        if isinstance(base_url, str) and "@" in base_url:
            parsed = urllib.parse.urlsplit(base_url)
            found.extend(p for p in (parsed.password, parsed.username) if p)
    return found


def clean_attributes(
    attributes: Mapping[str, object], scrub: Scrubber
) -> dict[str, AttributeValue]:
    """Drop ``None`` values and scrub every string (also inside string sequences)."""
    cleaned: dict[str, AttributeValue] = {}
    for key, value in attributes.items():
        if value is None:
            continue
        if isinstance(value, str):
            cleaned[key] = scrub(value)
        elif isinstance(value, bool | int | float):
            cleaned[key] = value
        elif isinstance(value, list | tuple):
            cleaned[key] = [scrub(str(v)) for v in value]
        else:
            cleaned[key] = scrub(str(value))
    return cleaned


# -- JSON ------------------------------------------------------------------------------------------


def _default(value: object) -> object:
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    if attrs.has(type(value)):
        return unstructure(value)
    dump = getattr(value, "model_dump", None)
    if callable(dump) and not isinstance(value, type):
        return dump()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return repr(value)
    if isinstance(value, set | frozenset):
        return list(value)
    return str(value)


def to_json(value: object) -> str:
    """``json.dumps(value, ensure_ascii=False)``, converting what JSON cannot hold."""
    return json.dumps(value, ensure_ascii=False, default=_default)


# -- messages ----------------------------------------------------------------------------------------


def _modality(media_type: str) -> str:
    prefix = media_type.split("/", 1)[0]
    return prefix if prefix in ("image", "audio", "video") else "unknown"


def _data_part(block: DataBlock) -> JSONObject:
    source = block.source
    if isinstance(source, Base64Source):
        return {
            "type": "blob",
            "content": source.data,
            "media_type": source.media_type,
            "modality": _modality(source.media_type),
        }
    return {"type": "uri", "uri": source.url, "modality": _modality(source.media_type)}


def _parts(blocks: Iterable[object]) -> list[JSONObject]:
    parts: list[JSONObject] = []
    for block in blocks:
        if isinstance(block, TextBlock):
            parts.append({"type": "text", "content": block.text})
        elif isinstance(block, ThinkingBlock):
            parts.append({"type": "reasoning", "content": block.thinking})
        elif isinstance(block, ToolCallBlock):
            try:
                arguments: JSONValue = json.loads(block.input) if block.input.strip() else {}
            except ValueError:
                arguments = block.input
            parts.append(
                {"type": "tool_call", "id": block.id, "name": block.name, "arguments": arguments}
            )
        elif isinstance(block, ToolResultBlock):
            output = block.output
            response: JSONValue = output if isinstance(output, str) else _parts(output)
            parts.append({"type": "tool_call_response", "id": block.id, "response": response})
        elif isinstance(block, DataBlock):
            parts.append(_data_part(block))
        # Hint blocks (and anything unknown) are instructions to the model, not conversation.
    return parts


def to_otel_message(msg: Msg, finish_reason: str | None = None) -> JSONObject:
    """A message in the GenAI "input messages" shape, or with ``finish_reason`` in the
    "output messages" shape."""
    message: JSONObject = {"role": msg.role, "parts": _parts(msg.content), "name": msg.name}
    if finish_reason is not None:
        message["finish_reason"] = finish_reason
    return message


def finish_reason(response: object) -> str:
    """``gen_ai.response.finish_reasons``: ``"interrupted"``, ``"length"`` (cut off at the
    output limit), ``"content_filter"``, ``"tool_calls"`` (the response calls tools),
    ``"stop"``, or ``"unknown"`` for something that is no ChatResponse."""
    if not isinstance(response, ChatResponse):
        return "unknown"
    if response.finished_reason == FinishedReason.INTERRUPTED:
        return "interrupted"
    if response.finished_reason == FinishedReason.MAX_TOKENS:
        return "length"
    if response.finished_reason == FinishedReason.CONTENT_FILTER:
        return "content_filter"
    if any(isinstance(block, ToolCallBlock) for block in response.content):
        return "tool_calls"
    return "stop"


def chat_output_messages(response: ChatResponse) -> list[JSONObject]:
    """``gen_ai.output.messages`` of a model call; a message's ``finish_reason`` is
    ``"tool_call"`` where the response calls tools, as the output-message schema names it."""
    reason = finish_reason(response)
    return [
        {
            "role": "assistant",
            "parts": _parts(response.content),
            "finish_reason": "tool_call" if reason == "tool_calls" else reason,
        }
    ]


# -- model requests ------------------------------------------------------------------------------------

_PROVIDERS = {
    "dashscope": "dashscope",
    "openai": "openai",
    "anthropic": "anthropic",
    "gemini": "gcp.gemini",
    "ollama": "ollama",
    "deepseek": "deepseek",
    "xai": "x_ai",
    "moonshot": "moonshot",
    "minimax": "minimax",
    "volcengine": "volcengine",
}
_OPENAI_HOSTS = (
    ("api.openai.com", "openai"),
    ("dashscope", "dashscope"),
    ("deepseek", "deepseek"),
    ("moonshot", "moonshot"),
    ("volces.com", "volcengine"),
    ("generativelanguage.googleapis.com", "gcp.gemini"),
    ("openai.azure.com", "azure.ai.openai"),
    ("amazonaws.com", "aws.bedrock"),
    ("api.x.ai", "x_ai"),
)


def _base_url(model: object) -> str | None:
    credential = getattr(model, "credential", None)
    if credential is None:
        return None
    try:
        url = credential.get_base_url()
    except Exception:
        url = getattr(credential, "base_url", None)
    return url if isinstance(url, str) else None


def provider_name(model: object) -> str:
    """``gen_ai.provider.name``: from the class name; for OpenAI-compatible models, the host."""
    name = type(model).__name__
    for suffix in ("ChatModel", "MultiAgentModel", "ResponseModel"):
        name = name.removesuffix(suffix)
    provider = _PROVIDERS.get(name.lower(), "unknown")
    if provider == "openai":
        url = _base_url(model) or ""
        return next((p for fragment, p in _OPENAI_HOSTS if fragment in url), "openai")
    return provider


def server_address(model: object) -> tuple[str | None, int | None]:
    """The host and port of the model's API (never the userinfo part of the URL)."""
    url = _base_url(model)
    if not url:
        return None, None
    try:
        parsed = urllib.parse.urlsplit(url)
        return parsed.hostname, parsed.port
    except ValueError:
        return None, None


_REQUEST_KEYS = (
    ("temperature", ("temperature",)),
    ("top_p", ("top_p", "p")),
    ("top_k", ("top_k",)),
    ("max_tokens", ("max_tokens", "max_output_tokens")),
    ("presence_penalty", ("presence_penalty",)),
    ("frequency_penalty", ("frequency_penalty",)),
    ("stop_sequences", ("stop_sequences", "stop")),
    ("seed", ("seed",)),
)


def _generation_parameters(model: object, input_kwargs: Mapping[str, object]) -> dict[str, object]:
    merged: dict[str, object] = {}
    generate_kwargs = getattr(model, "generate_kwargs", None)
    if isinstance(generate_kwargs, Mapping):
        merged.update(generate_kwargs)
    parameters = getattr(model, "parameters", None)
    if parameters is not None and attrs.has(type(parameters)):
        merged.update(attrs.asdict(parameters, recurse=False))
    merged.update(input_kwargs)
    return merged


def request_attributes(
    model: object, input_kwargs: Mapping[str, object]
) -> dict[str, AttributeValue]:
    """``gen_ai.request.*`` from the model's generation parameters and the call's kwargs."""
    params = _generation_parameters(model, input_kwargs)
    out: dict[str, AttributeValue] = {}
    for attribute, keys in _REQUEST_KEYS:
        value = next((params[k] for k in keys if params.get(k) is not None), None)
        if value is None:
            continue
        if attribute == "stop_sequences":
            if isinstance(value, str):
                value = [value]
            elif isinstance(value, Iterable):
                value = [str(v) for v in value]
            else:
                continue
        elif not isinstance(value, bool | int | float):
            continue
        out[f"gen_ai.request.{attribute}"] = value
    return out


def tool_definitions(tools: object, tool_choice: object) -> str | None:
    """``gen_ai.tool.definitions`` (JSON), or ``None`` when no tools may be called."""
    if not tools or not isinstance(tools, Iterable):
        return None
    if isinstance(tool_choice, ToolChoice) and tool_choice.mode == "none":
        return None
    definitions: list[JSONObject] = []
    for schema in tools:
        if not isinstance(schema, Mapping):
            continue
        function = schema.get("function")
        if not isinstance(function, Mapping):
            continue
        entry = {
            "type": schema.get("type", "function"),
            "name": function.get("name"),
            "description": function.get("description"),
            "parameters": function.get("parameters"),
        }
        definitions.append({k: v for k, v in entry.items() if v is not None})
    return to_json(definitions) if definitions else None


def agent_description(agent: object) -> str:
    """The first paragraph of the agent class's docstring."""
    doc = type(agent).__doc__
    if not doc or not doc.strip():
        return "No description available"
    return " ".join(doc.strip().split("\n\n", 1)[0].split())
