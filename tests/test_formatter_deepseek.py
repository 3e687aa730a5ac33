"""DeepSeek formatters (trioagent/formatter/_deepseek.py).

Golden cases: AgentScope 2.0.11's outputs (``tests/golden_formatters.jsonl``), compared
byte-for-byte after ``json.dumps``.  The shared inputs come from ``golden_inputs``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

import pytest
from formatter_kit import png_image
from golden_inputs import (
    B64,
    complex_msgs,
    conv,
    golden_cases,
    hint_mm_msgs,
    hint_msgs,
    image,
    sys_msgs,
    toolimg,
    tools_msgs,
    two_groups,
)

from trioagent.formatter import (
    DeepSeekChatFormatter,
    DeepSeekMultiAgentFormatter,
)
from trioagent.message import (
    AssistantMsg,
    HintBlock,
    Msg,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    UserMsg,
)

CASES: dict[str, tuple[Callable[[], Any], Callable[[], list[Msg]]]] = {
    "deepseek_chat.full": (DeepSeekChatFormatter, lambda: sys_msgs() + conv(None) + tools_msgs()),
    "deepseek_chat.complex": (DeepSeekChatFormatter, complex_msgs),
    "deepseek_chat.hint": (DeepSeekChatFormatter, hint_msgs),
    "deepseek_multi.full": (
        DeepSeekMultiAgentFormatter,
        lambda: sys_msgs() + conv(None) + tools_msgs(),
    ),
}

IMG_PART = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{B64}"}}


def test_every_deepseek_golden_case_is_covered() -> None:
    names = {n for n in golden_cases() if n.startswith(("deepseek_chat.", "deepseek_multi."))}

    assert names == set(CASES)


@pytest.mark.parametrize("case", sorted(CASES))
async def test_golden(case: str) -> None:
    factory, build = CASES[case]

    out = await factory().format(build())

    assert json.dumps(out) == json.dumps(golden_cases()[case])


async def test_text_only_by_default_images_skipped(caplog: pytest.LogCaptureFixture) -> None:
    msg = UserMsg("user", [TextBlock(text="What is this?"), image("b64", "I")])

    with caplog.at_level(logging.WARNING, "trioagent.formatter"):
        out = await DeepSeekChatFormatter().format([msg])

    assert out == [{"role": "user", "content": "What is this?"}]
    assert "image/png" in caplog.text


async def test_images_in_user_messages_when_enabled() -> None:
    formatter = DeepSeekChatFormatter(input_types=["text/plain", "image/*"])
    msg = UserMsg("user", [TextBlock(text="What is this?"), image("b64", "I")])

    out = await formatter.format([msg])

    assert out == [
        {"role": "user", "content": [{"type": "text", "text": "What is this?"}, IMG_PART]}
    ]


async def test_media_in_assistant_messages_is_dropped(caplog: pytest.LogCaptureFixture) -> None:
    formatter = DeepSeekChatFormatter(input_types=["text/plain", "image/*"])
    msg = AssistantMsg("assistant", [TextBlock(text="Here:"), image("b64", "I")])

    with caplog.at_level(logging.WARNING, "trioagent.formatter"):
        out = await formatter.format([msg])

    assert out == [{"role": "assistant", "content": "Here:", "reasoning_content": ""}]
    assert "assistant message" in caplog.text


async def test_multimodal_hint_notes_unsupported_media() -> None:
    out = await DeepSeekChatFormatter().format(hint_mm_msgs())

    assert out == [
        {
            "role": "user",
            "content": "Inspect this screenshot:\n"
            "[image/png attached, not supported by this provider]",
        }
    ]
    enabled = DeepSeekChatFormatter(input_types=["text/plain", "image/*"])
    out = await enabled.format(hint_mm_msgs())
    assert out == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "Inspect this screenshot:"}, IMG_PART],
        }
    ]


async def test_thinking_only_and_empty_assistant_messages() -> None:
    out = await DeepSeekChatFormatter().format(
        [
            AssistantMsg(
                "assistant", [ThinkingBlock(thinking="plan"), ThinkingBlock(thinking="go")]
            ),
            AssistantMsg("assistant", []),
            AssistantMsg("assistant", [ToolCallBlock(id="c", name="f", input="{}")]),
        ]
    )

    assert out == [
        {"role": "assistant", "content": "", "reasoning_content": "plan\ngo"},
        {
            "role": "assistant",
            "content": None,
            "reasoning_content": "",
            "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        },
    ]


async def test_tool_result_image_is_described_not_promoted_by_default() -> None:
    _, tool, final = await DeepSeekChatFormatter().format(toolimg("url"))

    assert tool["content"] == (
        "Here is the map.\n<system-reminder>A(n) image file is returned and can be accessed at "
        "the URL: https://example.com/image.png.</system-reminder>"
    )
    assert final == {
        "role": "assistant",
        "content": "Here is the map of Tokyo.",
        "reasoning_content": "",
    }


async def test_tool_result_image_promoted_without_name_when_enabled() -> None:
    formatter = DeepSeekChatFormatter(input_types=["text/plain", "image/*"])

    _, _, promoted, _ = await formatter.format(toolimg("b64"))

    assert promoted == {
        "role": "user",
        "content": [
            {
                "type": "text",
                "text": "<system-reminder>The multimodal data and their identifiers are listed "
                "as follows:",
            },
            {"type": "text", "text": "- IMGID (image file): "},
            IMG_PART,
            {"type": "text", "text": "</system-reminder>"},
        ],
    }


async def test_multi_agent_two_groups() -> None:
    out = await DeepSeekMultiAgentFormatter().format(two_groups())

    assert out == [
        {
            "role": "user",
            "content": "# Conversation History\nThe content between <history></history> tags "
            "contains your conversation history\n<history>\nalice: Hi Bob\nbob: Hello\n"
            "bob: Alice\n</history>",
        },
        {
            "role": "assistant",
            "content": None,
            "reasoning_content": "",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "t", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "ok", "name": "t"},
        {"role": "user", "content": "<history>\ncarol: Me too\n</history>"},
    ]


async def test_multi_agent_history_keeps_images_inline() -> None:
    formatter = DeepSeekMultiAgentFormatter(input_types=["text/plain", "image/*"])
    msgs = [
        UserMsg("alice", [TextBlock(text="Look"), image("b64", "I")]),
        AssistantMsg("bob", "Nice"),
    ]

    (out,) = await formatter.format(msgs)

    assert out == {
        "role": "user",
        "content": [
            {
                "type": "text",
                "text": "# Conversation History\nThe content between <history></history> tags "
                "contains your conversation history\n<history>\nalice: Look\nalice: ",
            },
            IMG_PART,
            {"type": "text", "text": "\nbob: Nice\n</history>"},
        ],
    }


async def test_multi_agent_group_without_text_produces_nothing() -> None:
    out = await DeepSeekMultiAgentFormatter().format(
        [AssistantMsg("bob", [ThinkingBlock(thinking="hmm")]), UserMsg("carol", "Hi")]
    )

    # the prompt goes to the first group that produced output
    assert out == [
        {
            "role": "user",
            "content": "# Conversation History\nThe content between <history></history> tags "
            "contains your conversation history\n<history>\ncarol: Hi\n</history>",
        }
    ]


# -- edges beyond the golden cases ---------------------------------------------------------------


async def test_deepseek_text_only_hint_notes_the_media_it_cannot_send() -> None:
    hint = HintBlock(hint=[TextBlock(text="look"), png_image()])
    out = await DeepSeekChatFormatter().format([AssistantMsg("a", [hint])])
    assert out == [
        {"role": "user", "content": "look\n[image/png attached, not supported by this provider]"}
    ]
