"""DashScope formatters (trioagent/formatter/_dashscope.py).

Golden cases: AgentScope's outputs (``tests/golden_formatters.jsonl``), compared
byte-for-byte after ``json.dumps``.  The shared inputs come from ``golden_inputs``.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio
from golden_inputs import (
    complex_msgs,
    conv,
    golden_cases,
    hint_msgs,
    image,
    sys_msgs,
    thinking_msgs,
    toolimg,
    tools_msgs,
    two_groups,
)

from trioagent.formatter import DashScopeChatFormatter, DashScopeMultiAgentFormatter
from trioagent.message import (
    AssistantMsg,
    Base64Source,
    DataBlock,
    HintBlock,
    Msg,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    URLSource,
    UserMsg,
)
from trioagent.testing import OpenAICompatibleServer, serve_openai_compatible

THINKING = "application/x-thinking"


def _data(url_or_b64: str, media_type: str) -> DataBlock:
    if url_or_b64.startswith(("https://", "http://")):
        return DataBlock(source=URLSource(url=url_or_b64, media_type=media_type))
    return DataBlock(source=Base64Source(data=url_or_b64, media_type=media_type))


def _thinking_reply() -> list[Msg]:
    return [
        AssistantMsg(
            "assistant",
            [ThinkingBlock(thinking="a"), ThinkingBlock(thinking="b"), TextBlock(text="reply")],
        )
    ]


# case -> (formatter factory, input builder)
CASES: dict[str, tuple[Callable[[], Any], Callable[[], list[Msg]]]] = {
    "dashscope_chat.full": (
        DashScopeChatFormatter,
        lambda: sys_msgs() + conv("url") + tools_msgs(),
    ),
    "dashscope_chat.audio_b64_mpeg": (
        DashScopeChatFormatter,
        lambda: [UserMsg("user", [_data("QUFB", "audio/mpeg")])],
    ),
    "dashscope_chat.audio_url": (
        DashScopeChatFormatter,
        lambda: [UserMsg("user", [_data("https://example.com/audio.mp3", "audio/mpeg")])],
    ),
    "dashscope_chat.video_url": (
        DashScopeChatFormatter,
        lambda: [UserMsg("user", [_data("https://example.com/v.mp4", "video/mp4")])],
    ),
    "dashscope_chat.thinking_dropped_default": (DashScopeChatFormatter, thinking_msgs),
    "dashscope_chat.thinking_with_flag": (
        partial(DashScopeChatFormatter, input_types=["text/plain", "image/*", THINKING]),
        _thinking_reply,
    ),
    "dashscope_chat.complex_with_thinking_flag": (
        partial(DashScopeChatFormatter, input_types=["text/plain", THINKING]),
        complex_msgs,
    ),
    "dashscope_chat.tool_result_url_image": (DashScopeChatFormatter, lambda: toolimg("url")),
    "dashscope_chat.hint": (DashScopeChatFormatter, hint_msgs),
    "dashscope_multi.full": (
        DashScopeMultiAgentFormatter,
        lambda: sys_msgs() + conv("url") + tools_msgs(),
    ),
}


def test_every_dashscope_golden_case_is_covered() -> None:
    names = {n for n in golden_cases() if n.startswith(("dashscope_chat.", "dashscope_multi."))}

    assert names == set(CASES)


@pytest.mark.parametrize("case", sorted(CASES))
async def test_golden(case: str) -> None:
    factory, build = CASES[case]

    out = await factory().format(build())

    assert json.dumps(out) == json.dumps(golden_cases()[case])


# -- media -----------------------------------------------------------------------------------


async def test_base64_video_and_wav_audio_are_inlined() -> None:
    msg = UserMsg("user", [_data("AAAA", "video/mp4"), _data("UklGRg==", "audio/wav")])

    (out,) = await DashScopeChatFormatter().format([msg])

    assert out == {
        "role": "user",
        "content": [
            {"type": "video_url", "video_url": {"url": "data:video/mp4;base64,AAAA"}},
            {
                "type": "input_audio",
                "input_audio": {"data": "data:;base64,UklGRg==", "format": "wav"},
            },
        ],
    }


async def test_file_url_audio_is_read_and_inlined(tmp_path: Path) -> None:
    path = tmp_path / "clip.mp3"
    path.write_bytes(b"ID3 fake")
    block = DataBlock(source=URLSource(url=path.as_uri(), media_type="audio/mpeg"))

    (out,) = await DashScopeChatFormatter().format([UserMsg("user", [block])])

    encoded = base64.b64encode(b"ID3 fake").decode()
    assert out["content"] == [
        {"type": "input_audio", "input_audio": {"data": f"data:;base64,{encoded}", "format": "mp3"}}
    ]


async def test_pdf_is_not_accepted() -> None:
    pdf = _data("JVBERi0=", "application/pdf")

    (out,) = await DashScopeChatFormatter().format([UserMsg("user", [TextBlock(text="read"), pdf])])

    assert out == {"role": "user", "content": [{"type": "text", "text": "read"}]}
    # even when a caller lists it, DashScope has no PDF part: skipped
    formatter = DashScopeChatFormatter(input_types=["text/plain", "application/pdf"])
    (out,) = await formatter.format([UserMsg("user", [TextBlock(text="read"), pdf])])
    assert out["content"] == [{"type": "text", "text": "read"}]


async def test_remote_media_is_never_downloaded(nursery: trio.Nursery) -> None:
    server: OpenAICompatibleServer = await nursery.start(serve_openai_compatible)
    url = server.add_file("v.mp4", b"movie", "video/mp4")

    (out,) = await DashScopeChatFormatter().format([UserMsg("user", [_data(url, "video/mp4")])])

    assert out["content"] == [{"type": "video_url", "video_url": {"url": url}}]
    assert server.requests == []


# -- thinking replay -------------------------------------------------------------------------


async def test_thinking_only_message_is_kept_with_the_flag() -> None:
    msgs = [AssistantMsg("assistant", [ThinkingBlock(thinking="plan")])]

    assert await DashScopeChatFormatter().format(msgs) == []
    out = await DashScopeChatFormatter(input_types=["text/plain", THINKING]).format(msgs)
    assert out == [{"role": "assistant", "content": None, "reasoning_content": "plan"}]


async def test_thinking_goes_with_the_fragment_flushed_by_a_hint() -> None:
    msg = AssistantMsg(
        "assistant",
        [
            ThinkingBlock(thinking="t1"),
            HintBlock(hint="be brief"),
            ThinkingBlock(thinking="t2"),
            TextBlock(text="ok"),
        ],
    )

    out = await DashScopeChatFormatter(input_types=["text/plain", THINKING]).format([msg])

    assert out == [
        {"role": "assistant", "content": None, "reasoning_content": "t1"},
        {"role": "user", "content": [{"type": "text", "text": "be brief"}]},
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "ok"}],
            "reasoning_content": "t2",
        },
    ]


# -- multi-agent -----------------------------------------------------------------------------


async def test_multi_agent_two_groups_has_no_name_fields() -> None:
    out = await DashScopeMultiAgentFormatter().format(two_groups())

    assert all("name" not in m or m["role"] == "tool" for m in out)
    assert [m["role"] for m in out] == ["user", "assistant", "tool", "user"]
    assert out[3]["content"] == [{"type": "text", "text": "<history>\ncarol: Me too\n</history>"}]


async def test_multi_agent_media_only_history() -> None:
    msgs = [UserMsg("user", [image("url", "I1")])]

    out = await DashScopeMultiAgentFormatter().format(msgs)

    assert out == [
        {
            "role": "user",
            "content": [
                {"type": "image_url", "image_url": {"url": "https://example.com/image.png"}}
            ],
        }
    ]


async def test_tool_result_with_promoted_video_has_no_name() -> None:
    msg = AssistantMsg(
        "assistant",
        [
            ToolCallBlock(id="c", name="film", input="{}"),
            ToolResultBlock(id="c", name="film", output=[_data("AAAA", "video/mp4")]),
        ],
    )
    video_id = msg.content[1].output[0].id  # type: ignore[union-attr]

    _, tool, promoted = await DashScopeChatFormatter().format([msg])

    assert tool["content"] == (
        "<system-reminder>A(n) video file is returned and will be presented to you with the "
        f"identifier [{video_id}].</system-reminder>"
    )
    assert promoted["role"] == "user"
    assert "name" not in promoted
    assert promoted["content"][2] == {
        "type": "video_url",
        "video_url": {"url": "data:video/mp4;base64,AAAA"},
    }


# -- edges beyond the golden cases ---------------------------------------------------------------


async def test_dashscope_replays_thinking_only_when_asked() -> None:
    msgs = [AssistantMsg("a", [ThinkingBlock(thinking="t"), TextBlock(text="x")])]
    plain = await DashScopeChatFormatter().format(msgs)
    assert "reasoning_content" not in plain[0]
    thinking = DashScopeChatFormatter(input_types=["text/plain", "application/x-thinking"])
    assert (await thinking.format(msgs))[0]["reasoning_content"] == "t"
