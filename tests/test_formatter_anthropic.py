"""Anthropic formatters (trioagent/formatter/_anthropic.py).

The golden cases are AgentScope's outputs (``tests/golden_formatters.jsonl``); the formatted
messages must be byte-for-byte equal
once serialised with ``json.dumps``.
"""

from __future__ import annotations

import base64
import json
import logging
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio
from formatter_kit import (
    PNG_B64,
    assert_tool_pairing,
    dumped,
    png_image,
    search_call,
    search_result,
)
from golden_inputs import (
    B64,
    complex_msgs as plain_complex_msgs,
    conv,
    golden_cases,
    hint_msgs,
    image,
    pdf_msgs,
    sys_msgs,
    toolimg,
    tools_msgs,
    truncated_tool_msgs,
    two_groups,
)

from trioagent.formatter import (
    AnthropicChatFormatter,
    AnthropicMultiAgentFormatter,
    FormatterBase,
)
from trioagent.message import (
    AssistantMsg,
    Base64Source,
    DataBlock,
    HintBlock,
    Msg,
    SystemMsg,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    URLSource,
    UserMsg,
)
from trioagent.testing import OpenAICompatibleServer, serve_openai_compatible


def complex_msgs() -> list[Msg]:
    """COMPLEX with a signed first thinking block (t1/s1); the other two are unsigned."""
    (msg,) = plain_complex_msgs()
    msg.content[0] = ThinkingBlock(thinking="t1", extra={"signature": "s1"})
    return [msg]


CASES: dict[str, tuple[type[FormatterBase], Any]] = {
    "anthropic_chat.full": (AnthropicChatFormatter, lambda: sys_msgs() + conv() + tools_msgs()),
    "anthropic_chat.thinking_signature": (
        AnthropicChatFormatter,
        lambda: [
            AssistantMsg(
                "assistant",
                [
                    ThinkingBlock(thinking="inner thoughts", extra={"signature": "sig_abc"}),
                    TextBlock(text="reply"),
                ],
            )
        ],
    ),
    "anthropic_chat.thinking_no_sig_and_redacted": (
        AnthropicChatFormatter,
        lambda: [
            AssistantMsg(
                "assistant",
                [
                    ThinkingBlock(thinking="x"),
                    ThinkingBlock(thinking="", extra={"redacted_thinking_data": "enc"}),
                    TextBlock(text=""),
                    TextBlock(text="reply"),
                ],
            )
        ],
    ),
    "anthropic_chat.tool_result_image": (AnthropicChatFormatter, lambda: toolimg("b64")),
    "anthropic_chat.parallel_results_empty_output": (
        AnthropicChatFormatter,
        lambda: [
            AssistantMsg(
                "assistant",
                [
                    ToolCallBlock(id="a", name="f", input='{"x": 1}'),
                    ToolCallBlock(id="b", name="g", input=""),
                    ToolResultBlock(id="a", name="f", output="ra"),
                    ToolResultBlock(id="b", name="g", output=""),
                    TextBlock(text="done"),
                ],
            )
        ],
    ),
    "anthropic_chat.complex": (AnthropicChatFormatter, complex_msgs),
    "anthropic_chat.hint": (AnthropicChatFormatter, hint_msgs),
    "anthropic_chat.pdf": (AnthropicChatFormatter, pdf_msgs),
    "anthropic_chat.truncated_tool_input": (AnthropicChatFormatter, truncated_tool_msgs),
    "anthropic_multi.full": (
        AnthropicMultiAgentFormatter,
        lambda: sys_msgs() + conv() + tools_msgs(),
    ),
    "anthropic_multi.two_groups": (AnthropicMultiAgentFormatter, two_groups),
}


def test_every_anthropic_golden_case_is_covered() -> None:
    anthropic_cases = {
        name for name in golden_cases() if name.startswith(("anthropic_chat.", "anthropic_multi."))
    }

    assert anthropic_cases == set(CASES)
    assert len(CASES) == 11


@pytest.mark.parametrize("case", sorted(CASES))
async def test_golden(case: str) -> None:
    formatter_cls, build = CASES[case]

    out = await formatter_cls().format(build())

    assert json.dumps(out) == json.dumps(golden_cases()[case])


# -- media ----------------------------------------------------------------------------------


def test_input_types() -> None:
    formatter = AnthropicChatFormatter()

    assert formatter.input_types == ["text/plain", "image/*", "application/pdf"]
    assert formatter.is_supported("image/webp")
    assert not formatter.is_supported("audio/wav")
    assert AnthropicMultiAgentFormatter().input_types == formatter.input_types


async def test_remote_and_file_images_are_inlined(nursery: trio.Nursery, tmp_path: Path) -> None:
    server: OpenAICompatibleServer = await nursery.start(partial(serve_openai_compatible))
    url = server.add_file("pic.jpg", b"\xff\xd8 fake jpeg", "image/jpeg")
    path = tmp_path / "doc.pdf"
    path.write_bytes(b"%PDF local")
    msg = UserMsg(
        "user",
        [
            DataBlock(source=URLSource(url=url, media_type="image/jpeg")),
            DataBlock(source=URLSource(url=path.as_uri(), media_type="application/pdf")),
        ],
    )

    (out,) = await AnthropicChatFormatter().format([msg])

    assert out == {
        "role": "user",
        "content": [
            {
                "type": "image",
                "source": {
                    "type": "base64",
                    "media_type": "image/jpeg",
                    "data": base64.b64encode(b"\xff\xd8 fake jpeg").decode(),
                },
            },
            {
                "type": "document",
                "source": {
                    "type": "base64",
                    "media_type": "application/pdf",
                    "data": base64.b64encode(b"%PDF local").decode(),
                },
            },
        ],
    }
    assert [r.path for r in server.requests] == ["/files/pic.jpg"]


async def test_unsupported_media_is_skipped(caplog: pytest.LogCaptureFixture) -> None:
    audio = DataBlock(source=Base64Source(data="UklGRg==", media_type="audio/wav"))
    csv = DataBlock(source=Base64Source(data="QQ==", media_type="text/csv"))
    formatter = AnthropicChatFormatter(input_types=["text/plain", "image/*", "text/*"])

    with caplog.at_level(logging.WARNING, "trioagent.formatter"):
        out = await formatter.format([UserMsg("user", [TextBlock(text="see"), audio, csv])])

    assert out == [{"role": "user", "content": [{"type": "text", "text": "see"}]}]
    assert "audio/wav" in caplog.text
    assert "text/csv" in caplog.text


async def test_unsupported_tool_result_media_is_described_in_text() -> None:
    msg = AssistantMsg(
        "assistant",
        [
            ToolCallBlock(id="c", name="film", input="{}"),
            ToolResultBlock(
                id="c",
                name="film",
                output=[
                    DataBlock(source=URLSource(url="https://x/v.mp4", media_type="video/mp4")),
                    DataBlock(source=Base64Source(data="AAAA", media_type="audio/wav")),
                    TextBlock(text=""),
                ],
            ),
        ],
    )

    _, results = await AnthropicChatFormatter().format([msg])

    assert results == {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "c",
                "content": [
                    {"type": "text", "text": "[video file returned, URL: https://x/v.mp4]"},
                    {"type": "text", "text": "[audio file returned, type: audio/wav]"},
                ],
            }
        ],
    }


async def test_multimodal_hint_after_tool_results() -> None:
    msg = AssistantMsg(
        "assistant",
        [
            ToolCallBlock(id="c", name="shot", input="{}"),
            ToolResultBlock(id="c", name="shot", output="taken"),
            HintBlock(hint=[TextBlock(text="Inspect:"), TextBlock(text=""), image("b64", "H")]),
            HintBlock(hint=""),
            HintBlock(hint=[]),
        ],
    )

    out = await AnthropicChatFormatter().format([msg])

    assert [m["role"] for m in out] == ["assistant", "user", "user"]
    assert out[1]["content"][0]["type"] == "tool_result"
    assert out[2]["content"] == [
        {"type": "text", "text": "Inspect:"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": B64}},
    ]


async def test_hint_between_results_and_text_flushes_the_results_as_user() -> None:
    msg = AssistantMsg(
        "assistant",
        [
            ToolCallBlock(id="c", name="f", input="{}"),
            ToolResultBlock(id="c", name="f", output="r"),
            TextBlock(text="after"),
            HintBlock(hint="be brief"),
        ],
    )

    out = await AnthropicChatFormatter().format([msg])

    assert [(m["role"], [p["type"] for p in m["content"]]) for m in out] == [
        ("assistant", ["tool_use"]),
        ("user", ["tool_result"]),
        ("assistant", ["text"]),
        ("user", ["text"]),
    ]


async def test_unrepairable_tool_input_is_sent_as_empty_object(
    caplog: pytest.LogCaptureFixture,
) -> None:
    msg = AssistantMsg("assistant", [ToolCallBlock(id="c", name="f", input="not json at all")])

    with caplog.at_level(logging.WARNING, "trioagent.formatter"):
        (out,) = await AnthropicChatFormatter().format([msg])

    assert out["content"] == [{"type": "tool_use", "id": "c", "name": "f", "input": {}}]
    assert "not a JSON object" in caplog.text


async def test_empty_messages_are_dropped() -> None:
    out = await AnthropicChatFormatter().format(
        [
            AssistantMsg("assistant", []),
            AssistantMsg("a", [ThinkingBlock(thinking="unsigned")]),
            UserMsg("u", ""),
            SystemMsg("s", "late system"),
        ]
    )

    assert out == [{"role": "system", "content": [{"type": "text", "text": "late system"}]}]


async def test_format_requires_a_list_of_msgs() -> None:
    with pytest.raises(TypeError, match="list of Msg"):
        await AnthropicChatFormatter().format("hello")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        await AnthropicMultiAgentFormatter().format([{"role": "user"}])  # type: ignore[list-item]


# -- multi-agent ---------------------------------------------------------------------------


async def test_multi_agent_media_follows_its_line_and_prompt_wraps_once() -> None:
    formatter = AnthropicMultiAgentFormatter(conversation_history_prompt="HISTORY:\n")
    msgs = [
        UserMsg("alice", [TextBlock(text="look"), image("b64", "A")]),
        AssistantMsg("", "nice"),
        AssistantMsg("bob", [ToolCallBlock(id="c", name="t", input="{}")]),
        UserMsg("carol", [image("b64", "C")]),
        AssistantMsg("dave", [ThinkingBlock(thinking="ignored"), TextBlock(text="bye")]),
    ]

    out = await formatter.format(msgs)

    img = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": B64}}
    assert out[0] == {
        "role": "user",
        "content": [
            {"type": "text", "text": "HISTORY:\n<history>\nalice: look"},
            img,
            {"type": "text", "text": "Agent: nice\n</history>"},
        ],
    }
    assert out[1] == {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "c", "name": "t", "input": {}}],
    }
    assert out[2] == {"role": "user", "content": [img, {"type": "text", "text": "dave: bye"}]}
    assert len(out) == 3


async def test_multi_agent_media_only_first_group_gets_tags() -> None:
    out = await AnthropicMultiAgentFormatter().format(
        [
            SystemMsg("system", [TextBlock(text="A"), TextBlock(text="B")]),
            AssistantMsg("a", [ThinkingBlock(thinking="nothing to show")]),
            UserMsg("u", [image("b64", "X")]),
        ]
    )

    assert out[0] == {"role": "system", "content": [{"type": "text", "text": "A\nB"}]}
    first, img, last = out[1]["content"]
    assert first["text"].startswith("# Conversation History\n")
    assert first["text"].endswith("<history>\n")
    assert img["type"] == "image"
    assert last == {"type": "text", "text": "</history>"}
    assert len(out) == 2


# -- edges beyond the golden cases: thinking ----------------------------------------------------


async def test_anthropic_signed_thinking_round_trips_even_when_its_text_is_empty() -> None:
    msgs = [
        AssistantMsg(
            "a",
            [
                ThinkingBlock(thinking="", extra={"signature": "SIG-EMPTY"}),
                ThinkingBlock(thinking="unsigned, from another provider"),
                ThinkingBlock(thinking="", extra={"redacted_thinking_data": "REDACTED"}),
                ThinkingBlock(thinking="plan", extra={"signature": "SIG"}),
                search_call(),
                search_result(),
            ],
        )
    ]
    out = await AnthropicChatFormatter().format(msgs)
    assert out[0]["content"] == [
        {"type": "thinking", "thinking": "", "signature": "SIG-EMPTY"},
        {"type": "redacted_thinking", "data": "REDACTED"},
        {"type": "thinking", "thinking": "plan", "signature": "SIG"},
        {"type": "tool_use", "id": "c1", "name": "search", "input": {"q": 1}},
    ]
    assert_tool_pairing(AnthropicChatFormatter, out)


async def test_anthropic_never_sends_whitespace_only_text() -> None:
    msgs = [
        UserMsg("u", "list the files"),
        AssistantMsg(
            "a",
            [
                TextBlock(text="\n\n"),
                ToolCallBlock(id="c1", name="ls", input="{}"),
                ToolResultBlock(id="c1", name="ls", output="a.txt"),
                ToolResultBlock(id="c2", name="ls", output=" \n"),
                TextBlock(text=" "),
                HintBlock(hint="\n"),
                HintBlock(hint=[TextBlock(text="\t")]),
            ],
        ),
        UserMsg("u", "   "),
    ]
    out = await AnthropicChatFormatter().format(msgs)
    for message in out:
        assert message["content"], message  # never an empty content list
        for block in message["content"]:
            if block["type"] == "text":
                assert block["text"].strip(), message
            for inner in block.get("content", []):
                assert inner["text"].strip(), message
    # The whitespace-only user turn is dropped like an empty message; the rest is intact.
    assert [m["role"] for m in out] == ["user", "assistant", "user"]
    assert out[1]["content"] == [{"type": "tool_use", "id": "c1", "name": "ls", "input": {}}]
    assert out[2]["content"][1]["content"] == [{"type": "text", "text": "(empty tool output)"}]


async def test_anthropic_multi_agent_drops_a_whitespace_only_system_prompt() -> None:
    out = await AnthropicMultiAgentFormatter().format(
        [SystemMsg("system", "  \n"), UserMsg("u", "hi")]
    )
    assert [m["role"] for m in out] == ["user"]


async def test_anthropic_moved_assistant_media_keeps_turns_valid() -> None:
    msgs = [
        UserMsg("u", "draw a cat"),
        AssistantMsg(
            "painter", [TextBlock(text="here"), png_image(), search_call(), search_result()]
        ),
        UserMsg("u", "describe it"),
        AssistantMsg("painter", "a cat"),
    ]
    out = await AnthropicChatFormatter().format(msgs)
    assert_tool_pairing(AnthropicChatFormatter, out)
    # The API combines consecutive turns of one role; combined, the turns alternate from a
    # user turn, and a user turn answering tool calls starts with its tool results.
    combined: list[dict[str, Any]] = []
    for message in out:
        if combined and combined[-1]["role"] == message["role"]:
            combined[-1]["content"] += message["content"]
        else:
            combined.append({"role": message["role"], "content": list(message["content"])})
    assert [m["role"] for m in combined] == ["user", "assistant", "user", "assistant"]
    kinds = [b["type"] for b in combined[2]["content"]]
    assert kinds == ["tool_result", "text", "image", "text"]


ANTHROPIC_IMAGE_TYPES = {"image/jpeg", "image/png", "image/gif", "image/webp"}


@pytest.mark.parametrize("cls", [AnthropicChatFormatter, AnthropicMultiAgentFormatter], ids=str)
@pytest.mark.parametrize("media_type", ["image/svg+xml", "image/bmp", "image/tiff"])
async def test_anthropic_sends_only_image_types_the_api_accepts(
    cls: type[FormatterBase], media_type: str
) -> None:
    odd = DataBlock(source=Base64Source(data="PHN2Zz4=", media_type=media_type))
    msgs = [
        UserMsg("u", [TextBlock(text="keep this text"), odd, png_image()]),
        AssistantMsg("a", [search_call(), search_result(output=[TextBlock(text="drawn"), odd])]),
    ]
    out = await cls().format(msgs)
    for message in out:
        for block in message["content"]:
            nested = block.get("content", []) if block["type"] == "tool_result" else [block]
            for inner in nested:
                if inner["type"] == "image":
                    assert inner["source"]["media_type"] in ANTHROPIC_IMAGE_TYPES
    text = dumped(out)
    assert "PHN2Zz4=" not in text
    assert PNG_B64 in text  # png is still sent
    assert "keep this text" in text
    assert f"[image file returned, type: {media_type}]" in text  # described in the result
