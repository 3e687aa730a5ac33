"""Moonshot formatters (trioagent/formatter/_moonshot.py).

Golden cases: AgentScope 2.0.11's outputs (``tests/golden_formatters.jsonl``), compared
byte-for-byte after ``json.dumps``.  The shared inputs come from ``golden_inputs``.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

import pytest
import trio
from golden_inputs import (
    B64,
    complex_msgs,
    conv,
    golden_cases,
    image,
    sys_msgs,
    toolimg,
    tools_msgs,
    two_groups,
)

from trioagent.formatter import MoonshotChatFormatter, MoonshotMultiAgentFormatter
from trioagent.message import (
    AssistantMsg,
    Base64Source,
    DataBlock,
    Msg,
    TextBlock,
    ThinkingBlock,
    URLSource,
    UserMsg,
)
from trioagent.testing import OpenAICompatibleServer, serve_openai_compatible

CASES: dict[str, tuple[Callable[[], Any], Callable[[], list[Msg]]]] = {
    "moonshot_chat.full": (MoonshotChatFormatter, lambda: sys_msgs() + conv(None) + tools_msgs()),
    "moonshot_chat.complex": (MoonshotChatFormatter, complex_msgs),
}


def test_every_moonshot_golden_case_is_covered() -> None:
    names = {n for n in golden_cases() if n.startswith(("moonshot_chat.", "moonshot_multi."))}

    assert names == set(CASES)


@pytest.mark.parametrize("case", sorted(CASES))
async def test_golden(case: str) -> None:
    factory, build = CASES[case]

    out = await factory().format(build())

    assert json.dumps(out) == json.dumps(golden_cases()[case])


async def test_remote_images_and_videos_are_downloaded_as_data_uris(nursery: trio.Nursery) -> None:
    server: OpenAICompatibleServer = await nursery.start(serve_openai_compatible)
    img_url = server.add_file("p.png", b"\x89PNG", "image/png")
    vid_url = server.add_file("v.mp4", b"movie", "video/mp4")
    msg = UserMsg(
        "user",
        [
            TextBlock(text="see"),
            DataBlock(source=URLSource(url=img_url, media_type="image/png")),
            DataBlock(source=URLSource(url=vid_url, media_type="video/mp4")),
        ],
    )

    (out,) = await MoonshotChatFormatter().format([msg])

    png = base64.b64encode(b"\x89PNG").decode()
    mp4 = base64.b64encode(b"movie").decode()
    assert out == {
        "role": "user",
        "name": "user",
        "content": [
            {"type": "text", "text": "see"},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{png}"}},
            {"type": "video_url", "video_url": {"url": f"data:video/mp4;base64,{mp4}"}},
        ],
    }
    assert [r.path for r in server.requests] == ["/files/p.png", "/files/v.mp4"]


async def test_base64_image_audio_and_pdf() -> None:
    msg = UserMsg(
        "user",
        [
            image("b64", "I"),
            DataBlock(source=Base64Source(data="UklGRg==", media_type="audio/wav")),
            DataBlock(source=Base64Source(data="JVBERi0=", media_type="application/pdf")),
        ],
    )

    (out,) = await MoonshotChatFormatter().format([msg])

    assert out["content"] == [
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{B64}"}},
        {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}},
    ]


async def test_promoted_tool_result_image_is_a_named_data_uri_message() -> None:
    _, _, promoted, final = await MoonshotChatFormatter().format(toolimg("b64"))

    assert promoted["role"] == "user"
    assert promoted["name"] == "system-reminder"
    assert promoted["content"][2] == {
        "type": "image_url",
        "image_url": {"url": f"data:image/png;base64,{B64}"},
    }
    assert final["reasoning_content"] == ""


async def test_thinking_only_message_and_empty_thinking() -> None:
    out = await MoonshotChatFormatter().format(
        [
            AssistantMsg("assistant", [ThinkingBlock(thinking="plan")]),
            AssistantMsg("assistant", [ThinkingBlock(thinking="")]),
        ]
    )

    assert out == [
        {"role": "assistant", "name": "assistant", "content": None, "reasoning_content": "plan"}
    ]


async def test_multi_agent_formatter() -> None:
    out = await MoonshotMultiAgentFormatter().format(sys_msgs() + two_groups())

    assert out[0] == {"role": "system", "content": "You're a helpful assistant."}
    assert out[1]["content"][0]["text"].endswith(
        "<history>\nalice: Hi Bob\nbob: Hello\nbob: Alice\n</history>"
    )
    assert out[2] == {
        "role": "assistant",
        "name": "bob",
        "content": None,
        "reasoning_content": "",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "t", "arguments": "{}"}}
        ],
    }
    assert out[4] == {
        "role": "user",
        "content": [{"type": "text", "text": "<history>\ncarol: Me too\n</history>"}],
    }
