"""Ollama formatters (trioagent/formatter/_ollama.py).

The golden cases are AgentScope 2.0.11's outputs (``tests/golden_formatters.jsonl``); the formatted
messages must be byte-for-byte equal once serialised with ``json.dumps``.
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
    b64_image,
    complex_msgs,
    conv,
    golden_cases,
    hint_msgs,
    sys_msgs,
    toolimg,
    tools_msgs,
    truncated_tool_msgs,
    two_groups,
)

from trioagent.formatter import FormatterBase, OllamaChatFormatter, OllamaMultiAgentFormatter
from trioagent.message import (
    AssistantMsg,
    Base64Source,
    DataBlock,
    HintBlock,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    URLSource,
    UserMsg,
)
from trioagent.testing import OpenAICompatibleServer, serve_openai_compatible

CASES: dict[str, tuple[type[FormatterBase], Any]] = {
    "ollama_chat.full": (OllamaChatFormatter, lambda: sys_msgs() + conv() + tools_msgs()),
    "ollama_chat.base64_image": (
        OllamaChatFormatter,
        lambda: [UserMsg("user", [TextBlock(text="What's this?"), b64_image()])],
    ),
    "ollama_chat.tool_result_b64_image": (OllamaChatFormatter, lambda: toolimg("b64")),
    "ollama_chat.complex": (OllamaChatFormatter, complex_msgs),
    "ollama_chat.hint": (OllamaChatFormatter, hint_msgs),
    "ollama_chat.truncated_tool_input": (OllamaChatFormatter, truncated_tool_msgs),
    "ollama_multi.full": (
        OllamaMultiAgentFormatter,
        lambda: sys_msgs() + conv() + tools_msgs(),
    ),
    "ollama_multi.two_groups": (OllamaMultiAgentFormatter, two_groups),
}


def test_every_ollama_golden_case_is_covered() -> None:
    ollama_cases = {
        name for name in golden_cases() if name.startswith(("ollama_chat.", "ollama_multi."))
    }

    assert ollama_cases == set(CASES)
    assert len(CASES) == 8


@pytest.mark.parametrize("case", sorted(CASES))
async def test_golden(case: str) -> None:
    formatter_cls, build = CASES[case]

    out = await formatter_cls().format(build())

    assert json.dumps(out) == json.dumps(golden_cases()[case])


# -- media ----------------------------------------------------------------------------------


async def test_remote_and_file_images_are_inlined_as_raw_base64(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    server: OpenAICompatibleServer = await nursery.start(partial(serve_openai_compatible))
    url = server.add_file("pic.png", b"remote png", "image/png")
    path = tmp_path / "local.png"
    path.write_bytes(b"local png")
    blocks: list[TextBlock | DataBlock] = [
        TextBlock(text="compare"),
        DataBlock(source=URLSource(url=url, media_type="image/png")),
        DataBlock(source=URLSource(url=path.as_uri(), media_type="image/png")),
    ]

    (msg,) = await OllamaChatFormatter().format([UserMsg("user", blocks)])

    assert msg == {
        "role": "user",
        "content": "compare",
        "images": [
            base64.b64encode(b"remote png").decode(),
            base64.b64encode(b"local png").decode(),
        ],
    }


async def test_non_image_media_is_skipped_even_when_allowed() -> None:
    audio = DataBlock(source=Base64Source(data="QUFB", media_type="audio/wav"))
    pdf = DataBlock(source=Base64Source(data="QUFB", media_type="application/pdf"))
    formatter = OllamaChatFormatter(input_types=["text/plain", "image/*", "audio/*"])

    out = await formatter.format([UserMsg("user", [TextBlock(text="hear"), audio, pdf])])

    assert out == [{"role": "user", "content": "hear"}]


async def test_tool_call_takes_pending_text_and_images() -> None:
    msg = AssistantMsg(
        "assistant",
        [
            TextBlock(text="a"),
            TextBlock(text="b"),
            b64_image(),
            ToolCallBlock(id="x", name="f", input='{"k": 1}'),
            ToolCallBlock(id="y", name="g", input=""),
        ],
    )

    out = await OllamaChatFormatter().format([msg])

    assert out == [
        {
            "role": "assistant",
            "content": "a\nb",
            "tool_calls": [{"function": {"name": "f", "arguments": {"k": 1}}}],
            "images": [B64],
        },
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"function": {"name": "g", "arguments": {}}}],
        },
    ]


async def test_unrepairable_arguments_are_sent_as_an_empty_object() -> None:
    msg = AssistantMsg("assistant", [ToolCallBlock(id="x", name="f", input="[1, 2]")])

    (out,) = await OllamaChatFormatter().format([msg])

    assert out["tool_calls"] == [{"function": {"name": "f", "arguments": {}}}]


async def test_promoted_images_wait_for_the_run_of_tool_results() -> None:
    msg = AssistantMsg(
        "assistant",
        [
            ToolCallBlock(id="a", name="f", input="{}"),
            ToolCallBlock(id="b", name="g", input="{}"),
            ToolResultBlock(id="a", name="f", output=[b64_image("IA")]),
            ToolResultBlock(id="b", name="g", output="plain"),
            TextBlock(text="done"),
        ],
    )

    out = await OllamaChatFormatter().format([msg])

    assert [(m["role"], m.get("tool_name")) for m in out] == [
        ("assistant", None),
        ("assistant", None),
        ("tool", "f"),
        ("tool", "g"),
        ("user", None),
        ("assistant", None),
    ]
    assert out[4]["images"] == [B64]
    assert out[2]["content"] == (
        "<system-reminder>A(n) image file is returned and will be presented to you with the "
        "identifier [IA].</system-reminder>"
    )


async def test_multimodal_hint_and_empty_messages() -> None:
    out = await OllamaChatFormatter().format(
        [
            AssistantMsg("assistant", []),
            AssistantMsg("a", [ThinkingBlock(thinking="only thinking")]),
            AssistantMsg("a", [HintBlock(hint=[])]),
            AssistantMsg("a", [HintBlock(hint=[TextBlock(text="look"), b64_image()])]),
            UserMsg("u", ""),
        ]
    )

    assert out == [
        {"role": "user", "content": "look", "images": [B64]},
        {"role": "user", "content": ""},
    ]


async def test_format_requires_a_list_of_msgs() -> None:
    with pytest.raises(TypeError, match="list of Msg"):
        await OllamaChatFormatter().format("hello")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        await OllamaMultiAgentFormatter().format([{"role": "user"}])  # type: ignore[list-item]


# -- multi-agent ----------------------------------------------------------------------------


async def test_multi_agent_history_images_and_custom_prompt() -> None:
    msgs = [
        UserMsg("alice", [TextBlock(text="look at this"), b64_image()]),
        AssistantMsg("bob", "nice"),
    ]

    out = await OllamaMultiAgentFormatter(conversation_history_prompt="H:\n").format(msgs)

    assert out == [
        {
            "role": "user",
            "content": "H:\n<history>\nalice:\nlook at this\nbob:\nnice\n</history>",
            "images": [B64],
        }
    ]


async def test_multi_agent_prompt_only_once_a_group_produced_output() -> None:
    msgs = [
        UserMsg("", []),  # no name, no text: produces nothing, the prompt is kept for later
        AssistantMsg("bob", [ToolCallBlock(id="c", name="t", input="{}")]),
        UserMsg("carol", "hello"),
        AssistantMsg("bob", [ToolCallBlock(id="d", name="t", input="{}")]),
        UserMsg("dave", "again"),
    ]

    out = await OllamaMultiAgentFormatter().format(msgs)

    assert out[1]["content"].startswith("# Conversation History\n")
    assert out[1]["content"].endswith("carol:\nhello\n</history>")
    assert out[3] == {"role": "user", "content": "dave:\nagain"}


def test_default_input_types() -> None:
    assert OllamaChatFormatter().input_types == ["text/plain", "image/*"]
    assert OllamaMultiAgentFormatter().supported_input_media_types == ["image/*"]
