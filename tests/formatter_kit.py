"""Builders and checks shared by the formatter test modules (not a test module).

``assert_tool_pairing`` checks what every provider API checks before it accepts a request:
each tool call is answered where the provider wants the answer, and each answer has its call.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from trioagent.formatter import (
    AnthropicChatFormatter,
    DashScopeChatFormatter,
    DeepSeekChatFormatter,
    FormatterBase,
    GeminiChatFormatter,
    MoonshotChatFormatter,
    OllamaChatFormatter,
    OpenAIChatFormatter,
    OpenAIResponseFormatter,
    XAIChatFormatter,
)
from trioagent.message import (
    Base64Source,
    DataBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
)

#: Chat formatters whose wire format is OpenAI Chat Completions (``tool_calls`` + ``tool``).
OPENAI_LIKE = {
    OpenAIChatFormatter,
    DashScopeChatFormatter,
    DeepSeekChatFormatter,
    MoonshotChatFormatter,
    XAIChatFormatter,
}

PNG_B64 = base64.b64encode(b"fake image bytes").decode()


def dumped(out: list[dict[str, Any]]) -> str:
    """The payload as the model sends it (bytes, as Gemini's thought signature, as repr)."""
    return json.dumps(out, ensure_ascii=False, default=repr)


def png_image(data: str = PNG_B64, block_id: str = "img1") -> DataBlock:
    return DataBlock(id=block_id, source=Base64Source(data=data, media_type="image/png"))


def search_call(call_id: str = "c1", arguments: str = '{"q": 1}') -> ToolCallBlock:
    return ToolCallBlock(id=call_id, name="search", input=arguments)


def search_result(
    call_id: str = "c1", output: str | list[TextBlock | DataBlock] = "ok", state: str = "success"
) -> ToolResultBlock:
    return ToolResultBlock(id=call_id, name="search", output=output, state=state)


def assert_tool_pairing(cls: type[FormatterBase], out: list[dict[str, Any]]) -> None:
    """Every tool call is answered, where the provider wants the answer, and every answer has
    its call (what the APIs check before they accept a request)."""
    if cls in OPENAI_LIKE:
        pending: list[str] = []
        for message in out:
            if message.get("role") == "tool":
                assert message["tool_call_id"] in pending, message
                pending.remove(message["tool_call_id"])
                continue
            assert not pending, f"tool calls {pending} not answered before {message}"
            pending = [c["id"] for c in message.get("tool_calls", [])]
        assert not pending
    elif cls is OpenAIResponseFormatter:
        calls = [i["call_id"] for i in out if i.get("type") == "function_call"]
        for index, item in enumerate(out):
            if item.get("type") == "function_call_output":
                earlier = [
                    i.get("call_id") for i in out[:index] if i.get("type") == "function_call"
                ]
                assert item["call_id"] in earlier
        outputs = [i["call_id"] for i in out if i.get("type") == "function_call_output"]
        assert sorted(calls) == sorted(outputs)
    elif cls is AnthropicChatFormatter:
        for index, message in enumerate(out):
            uses = [b["id"] for b in message["content"] if b["type"] == "tool_use"]
            answered = [b["tool_use_id"] for b in message["content"] if b["type"] == "tool_result"]
            if answered:
                previous = out[index - 1]
                assert previous["role"] == "assistant"
                assert set(answered) <= {b.get("id") for b in previous["content"]}
            if uses:
                following = out[index + 1]
                assert following["role"] == "user"
                got = {b.get("tool_use_id") for b in following["content"]}
                assert set(uses) <= got
    elif cls is GeminiChatFormatter:
        for index, turn in enumerate(out):
            calls = [p["function_call"]["id"] for p in turn["parts"] if "function_call" in p]
            if calls:
                following = out[index + 1]["parts"]
                responses = [p["function_response"]["id"] for p in following]
                assert sorted(calls) == sorted(responses)
    elif cls is OllamaChatFormatter:
        calls = sum(len(m.get("tool_calls", [])) for m in out)
        assert calls == sum(1 for m in out if m["role"] == "tool")
    else:  # pragma: no cover - every chat formatter is listed above
        raise AssertionError(cls)
