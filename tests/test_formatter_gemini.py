"""Gemini formatters (trioagent/formatter/_gemini.py).

The golden cases are AgentScope's outputs (``tests/golden_formatters.jsonl``); the formatted
messages must be byte-for-byte equal once serialised with ``json.dumps``.  AgentScope's Gemini output is the google-genai SDK's
content dicts, where a thought signature is raw ``bytes``; the golden file renders bytes as
``{"__bytes_b64__": <base64>}``, so the comparison serialises bytes the same way (every other
case holds no bytes and also compares with a plain ``json.dumps``).
"""

from __future__ import annotations

import base64
import json
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio
from golden_inputs import (
    B64,
    complex_msgs,
    conv,
    golden_cases,
    hint_msgs,
    image,
    sys_msgs,
    toolimg,
    tools_msgs,
    truncated_tool_msgs,
    two_groups,
)

from trioagent.formatter import FormatterBase, GeminiChatFormatter, GeminiMultiAgentFormatter
from trioagent.message import (
    AssistantMsg,
    Base64Source,
    DataBlock,
    HintBlock,
    SystemMsg,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    URLSource,
    UserMsg,
)
from trioagent.testing import OpenAICompatibleServer, serve_openai_compatible


def golden_json(value: Any) -> str:
    """``json.dumps`` with bytes rendered as the golden file does."""

    def default(obj: Any) -> Any:
        if isinstance(obj, bytes):
            return {"__bytes_b64__": base64.b64encode(obj).decode("ascii")}
        raise TypeError(f"not JSON serializable: {obj!r}")

    return json.dumps(value, default=default)


CASES: dict[str, tuple[type[FormatterBase], Any]] = {
    "gemini_chat.full": (GeminiChatFormatter, lambda: sys_msgs() + conv("b64") + tools_msgs()),
    "gemini_chat.thinking_kept": (
        GeminiChatFormatter,
        lambda: [
            AssistantMsg(
                "assistant",
                [
                    ThinkingBlock(thinking="inner thoughts"),
                    ThinkingBlock(thinking=""),
                    TextBlock(text="reply"),
                ],
            )
        ],
    ),
    "gemini_chat.tool_result_b64_image": (GeminiChatFormatter, lambda: toolimg("b64")),
    "gemini_chat.complex": (GeminiChatFormatter, complex_msgs),
    "gemini_chat.hint": (GeminiChatFormatter, hint_msgs),
    "gemini_chat.thought_signature_id": (
        GeminiChatFormatter,
        lambda: [
            AssistantMsg(
                "assistant",
                [
                    ToolCallBlock(id="gemini_ts:AQJzaWc=", name="f", input='{"a": 1}'),
                    ToolResultBlock(id="gemini_ts:AQJzaWc=", name="f", output="ok"),
                ],
            )
        ],
    ),
    "gemini_chat.truncated_tool_input": (GeminiChatFormatter, truncated_tool_msgs),
    "gemini_multi.full": (
        GeminiMultiAgentFormatter,
        lambda: sys_msgs() + conv("b64") + tools_msgs(),
    ),
    "gemini_multi.two_groups": (GeminiMultiAgentFormatter, two_groups),
}


def test_every_gemini_golden_case_is_covered() -> None:
    gemini_cases = {
        name for name in golden_cases() if name.startswith(("gemini_chat.", "gemini_multi."))
    }

    assert gemini_cases == set(CASES)
    assert len(CASES) == 9


@pytest.mark.parametrize("case", sorted(CASES))
async def test_golden(case: str) -> None:
    formatter_cls, build = CASES[case]

    out = await formatter_cls().format(build())

    assert golden_json(out) == json.dumps(golden_cases()[case])


@pytest.mark.parametrize("case", sorted(set(CASES) - {"gemini_chat.thought_signature_id"}))
async def test_golden_without_bytes_is_plain_json(case: str) -> None:
    formatter_cls, build = CASES[case]

    out = await formatter_cls().format(build())

    assert json.dumps(out) == json.dumps(golden_cases()[case])


async def test_thought_signature_is_raw_bytes() -> None:
    (call, _) = await GeminiChatFormatter().format(CASES["gemini_chat.thought_signature_id"][1]())

    assert call["parts"][0]["thought_signature"] == b"\x01\x02sig"


# -- media ----------------------------------------------------------------------------------


async def test_file_url_and_video_are_inlined(tmp_path: Path) -> None:
    path = tmp_path / "clip.mp4"
    path.write_bytes(b"\x00\x00 fake mp4")
    blocks: list[TextBlock | DataBlock] = [
        TextBlock(text="Describe"),
        DataBlock(source=URLSource(url=path.as_uri(), media_type="video/mp4")),
        DataBlock(source=Base64Source(data="UklGRg==", media_type="audio/wav")),
        DataBlock(source=Base64Source(data="JVBERg==", media_type="application/pdf")),
    ]

    (msg,) = await GeminiChatFormatter().format([UserMsg("user", blocks)])

    assert msg == {
        "role": "user",
        "parts": [
            {"text": "Describe"},
            {
                "inline_data": {
                    "data": base64.b64encode(b"\x00\x00 fake mp4").decode(),
                    "mime_type": "video/mp4",
                }
            },
            {"inline_data": {"data": "UklGRg==", "mime_type": "audio/wav"}},
            {"inline_data": {"data": "JVBERg==", "mime_type": "application/pdf"}},
        ],
    }


async def test_remote_image_is_downloaded(nursery: trio.Nursery) -> None:
    server: OpenAICompatibleServer = await nursery.start(partial(serve_openai_compatible))
    url = server.add_file("map.png", b"\x89PNG map", "image/png")
    block = DataBlock(source=URLSource(url=url, media_type="image/png"))

    (msg,) = await GeminiChatFormatter().format([UserMsg("user", [block])])

    assert msg["parts"] == [
        {
            "inline_data": {
                "data": base64.b64encode(b"\x89PNG map").decode(),
                "mime_type": "image/png",
            }
        }
    ]
    assert [r.path for r in server.requests] == ["/files/map.png"]


async def test_unsupported_media_is_skipped_and_empty_messages_dropped() -> None:
    csv = DataBlock(source=Base64Source(data="QQ==", media_type="text/csv"))
    formatter = GeminiChatFormatter(input_types=["text/plain", "image/*"])
    video = DataBlock(source=Base64Source(data="AA==", media_type="video/mp4"))

    out = await formatter.format(
        [
            UserMsg("user", [TextBlock(text="see"), csv, video]),
            AssistantMsg("assistant", [TextBlock(text=""), ThinkingBlock(thinking="")]),
            AssistantMsg("assistant", [HintBlock(hint=[]), HintBlock(hint="")]),
        ]
    )

    assert out == [{"role": "user", "parts": [{"text": "see"}]}]


async def test_hint_with_media_and_tool_result_then_hint() -> None:
    msg = AssistantMsg(
        "assistant",
        [
            ToolCallBlock(id="a", name="f", input=""),
            ToolResultBlock(id="a", name="f", output=[image("b64", "IA")]),
            HintBlock(hint=[TextBlock(text="Look:"), image("b64", "H")]),
        ],
    )

    out = await GeminiChatFormatter().format([msg])

    assert [(m["role"], [next(iter(p)) for p in m["parts"]]) for m in out] == [
        ("model", ["function_call"]),
        ("user", ["function_response"]),
        ("user", ["text", "text", "inline_data", "text"]),
        ("user", ["text", "inline_data"]),
    ]
    assert out[0]["parts"][0]["function_call"]["args"] == {}  # empty input → {}
    assert "thought_signature" not in out[0]["parts"][0]


async def test_unrepairable_arguments_and_bad_signature_are_tolerated() -> None:
    msg = AssistantMsg(
        "assistant",
        [
            ToolCallBlock(id="gemini_ts:%%%not base64", name="f", input="[1, 2]"),
        ],
    )

    (out,) = await GeminiChatFormatter().format([msg])

    assert out["parts"] == [
        {"function_call": {"id": "gemini_ts:%%%not base64", "name": "f", "args": {}}}
    ]


def test_input_types() -> None:
    formatter = GeminiChatFormatter()

    assert formatter.supported_input_media_types == [
        "image/*",
        "audio/*",
        "video/*",
        "application/pdf",
    ]
    assert GeminiMultiAgentFormatter().input_types == formatter.input_types


async def test_format_requires_a_list_of_msgs() -> None:
    with pytest.raises(TypeError, match="list of Msg"):
        await GeminiChatFormatter().format("hello")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        await GeminiMultiAgentFormatter().format([{"role": "user"}])  # type: ignore[list-item]


# -- multi-agent ---------------------------------------------------------------------------


async def test_multi_agent_media_first_and_last_and_custom_prompt() -> None:
    formatter = GeminiMultiAgentFormatter(conversation_history_prompt="HISTORY:\n")
    msgs = [
        UserMsg("u", [image("b64", "X")]),
        AssistantMsg("a", [TextBlock(text="nice"), ThinkingBlock(thinking="ignored")]),
        UserMsg("u", [image("b64", "Y")]),
        AssistantMsg("a", [ToolCallBlock(id="c", name="t", input="{}")]),
        UserMsg("u", "text now"),
    ]

    out = await formatter.format(msgs)

    inline = {"inline_data": {"data": B64, "mime_type": "image/png"}}
    assert out[0] == {
        "role": "user",
        "parts": [
            {"text": "HISTORY:\n<history>"},
            inline,
            {"text": "a: nice"},
            inline,
            {"text": "</history>"},
        ],
    }
    assert out[1] == {
        "role": "model",
        "parts": [{"function_call": {"id": "c", "name": "t", "args": {}}}],
    }
    assert out[2] == {"role": "user", "parts": [{"text": "<history>\nu: text now\n</history>"}]}
    assert len(out) == 3


async def test_multi_agent_prompt_only_after_output_and_late_system() -> None:
    msgs = [
        SystemMsg("system", [TextBlock(text="A"), TextBlock(text="B")]),
        AssistantMsg("a", [ThinkingBlock(thinking="nothing to show")]),
        AssistantMsg("a", [ToolCallBlock(id="c", name="t", input="{}")]),
        SystemMsg("late", "later system"),
    ]

    out = await GeminiMultiAgentFormatter().format(msgs)

    assert out[0] == {"role": "user", "parts": [{"text": "A\nB"}]}
    assert out[-1]["parts"][0]["text"].startswith("# Conversation History\n")
    assert out[-1]["parts"][0]["text"].endswith("<history>\nlate: later system\n</history>")
