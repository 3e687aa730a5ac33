"""OpenAI chat formatters (trioagent/formatter/_openai.py, _base.py).

The golden cases are AgentScope's outputs (``tests/golden_formatters.jsonl``); the formatted
messages must be byte-for-byte equal
once serialised with ``json.dumps``.
"""

from __future__ import annotations

import base64
import json
import re
import tempfile
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio
from formatter_kit import assert_tool_pairing, dumped, search_call, search_result
from golden_inputs import (
    B64,
    complex_msgs,
    conv,
    golden_cases,
    hint_mm_msgs,
    hint_msgs,
    image,
    pdf_msgs,
    sys_msgs,
    thinking_msgs,
    toolimg,
    tools_msgs,
    two_groups,
)

from trioagent.formatter import (
    FormatterBase,
    MoonshotChatFormatter,
    MoonshotMultiAgentFormatter,
    OpenAIChatFormatter,
    OpenAIMultiAgentFormatter,
)
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

CASES: dict[str, tuple[type[FormatterBase], Any]] = {
    "openai_chat.full": (OpenAIChatFormatter, lambda: sys_msgs() + conv("url") + tools_msgs()),
    "openai_chat.base64_image": (
        OpenAIChatFormatter,
        lambda: [UserMsg("user", [TextBlock(text="What's in this image?"), image("b64", "I")])],
    ),
    "openai_chat.pdf": (OpenAIChatFormatter, pdf_msgs),
    "openai_chat.thinking_dropped": (OpenAIChatFormatter, thinking_msgs),
    "openai_chat.tool_result_url_image": (OpenAIChatFormatter, lambda: toolimg("url")),
    "openai_chat.complex": (OpenAIChatFormatter, complex_msgs),
    "openai_chat.hint": (OpenAIChatFormatter, hint_msgs),
    "openai_chat.hint_multimodal": (OpenAIChatFormatter, hint_mm_msgs),
    "openai_multi.full": (
        OpenAIMultiAgentFormatter,
        lambda: sys_msgs() + conv("url") + tools_msgs(),
    ),
    "openai_multi.two_groups": (OpenAIMultiAgentFormatter, two_groups),
}


def test_every_openai_golden_case_is_covered() -> None:
    openai_cases = {
        name for name in golden_cases() if name.startswith(("openai_chat.", "openai_multi."))
    }

    assert openai_cases == set(CASES)


@pytest.mark.parametrize("case", sorted(CASES))
async def test_golden(case: str) -> None:
    formatter_cls, build = CASES[case]

    out = await formatter_cls().format(build())

    assert json.dumps(out) == json.dumps(golden_cases()[case])


# -- media ----------------------------------------------------------------------------------


async def test_file_url_image_is_read_and_inlined(tmp_path: Path) -> None:
    path = tmp_path / "pic.png"
    path.write_bytes(b"\x89PNG fake")
    block = DataBlock(source=URLSource(url=path.as_uri(), media_type="image/png"))

    (msg,) = await OpenAIChatFormatter().format([UserMsg("user", [block])])

    expected = "data:image/png;base64," + base64.b64encode(b"\x89PNG fake").decode()
    assert msg["content"] == [{"type": "image_url", "image_url": {"url": expected}}]


async def test_data_url_image_passed_through() -> None:
    url = f"data:image/png;base64,{B64}"
    block = DataBlock(source=URLSource(url=url, media_type="image/png"))

    (msg,) = await OpenAIChatFormatter().format([UserMsg("user", [block])])

    assert msg["content"][0]["image_url"]["url"] == url


@pytest.mark.parametrize(
    ("media_type", "fmt"), [("audio/wav", "wav"), ("audio/mp3", "mp3"), ("audio/mpeg", "mp3")]
)
async def test_audio_input(media_type: str, fmt: str) -> None:
    block = DataBlock(source=Base64Source(data="UklGRg==", media_type=media_type))

    (msg,) = await OpenAIChatFormatter().format([UserMsg("user", [block])])

    assert msg["content"] == [
        {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": fmt}}
    ]


async def test_unsupported_audio_format_is_a_type_error() -> None:
    block = DataBlock(source=Base64Source(data="AA==", media_type="audio/ogg"))

    with pytest.raises(TypeError, match="audio/ogg"):
        await OpenAIChatFormatter().format([UserMsg("user", [block])])


async def test_remote_audio_and_pdf_are_downloaded(nursery: trio.Nursery) -> None:
    server: OpenAICompatibleServer = await nursery.start(partial(serve_openai_compatible))
    audio_url = server.add_file("a.mp3", b"ID3 fake mp3", "audio/mpeg")
    pdf_url = server.add_file("d.pdf", b"%PDF fake", "application/pdf")
    blocks: list[TextBlock | DataBlock] = [
        DataBlock(source=URLSource(url=audio_url, media_type="audio/mpeg")),
        DataBlock(source=URLSource(url=pdf_url, media_type="application/pdf")),
    ]

    (msg,) = await OpenAIChatFormatter().format([UserMsg("user", blocks)])  # temporary client

    audio, pdf = msg["content"]
    assert audio["input_audio"] == {
        "data": base64.b64encode(b"ID3 fake mp3").decode(),
        "format": "mp3",
    }
    assert pdf["file"] == {
        "filename": "document.pdf",
        "file_data": "data:application/pdf;base64," + base64.b64encode(b"%PDF fake").decode(),
    }
    assert [r.path for r in server.requests] == ["/files/a.mp3", "/files/d.pdf"]


async def test_failed_download_is_a_clear_error(nursery: trio.Nursery) -> None:
    server: OpenAICompatibleServer = await nursery.start(partial(serve_openai_compatible))
    url = f"http://{server.host}:{server.port}/files/missing.mp3"
    block = DataBlock(source=URLSource(url=url, media_type="audio/mpeg"))

    with pytest.raises(ValueError, match="could not download"):
        await OpenAIChatFormatter().format([UserMsg("user", [block])])


async def test_unsupported_media_is_skipped() -> None:
    video = DataBlock(source=URLSource(url="https://x/v.mp4", media_type="video/mp4"))
    text_file = DataBlock(source=Base64Source(data="QQ==", media_type="text/csv"))
    formatter = OpenAIChatFormatter(input_types=["text/plain", "image/*", "text/*"])

    out = await formatter.format([UserMsg("user", [TextBlock(text="see"), video, text_file])])

    assert out == [{"role": "user", "name": "user", "content": [{"type": "text", "text": "see"}]}]


async def test_unsupported_tool_result_media_falls_back_to_text(tmp_path: Path) -> None:
    url_video = DataBlock(source=URLSource(url="https://x/v.mp4", media_type="video/mp4"))
    b64_video = DataBlock(
        source=Base64Source(data=base64.b64encode(b"movie").decode(), media_type="video/mp4")
    )
    msg = AssistantMsg(
        "assistant",
        [
            ToolCallBlock(id="c", name="film", input="{}"),
            ToolResultBlock(id="c", name="film", output=[url_video, b64_video]),
        ],
    )

    _, tool = await OpenAIChatFormatter().format([msg])

    url_line, file_line = tool["content"].split("\n")
    assert url_line == (
        "<system-reminder>A(n) video file is returned and can be accessed at the URL: "
        "https://x/v.mp4.</system-reminder>"
    )
    prefix = "<system-reminder>A(n) video file is returned and saved locally at: "
    assert file_line.startswith(prefix)
    saved = Path(file_line.removeprefix(prefix).removesuffix(".</system-reminder>"))
    try:
        assert saved.read_bytes() == b"movie"
        assert saved.suffix == ".mp4"
    finally:
        saved.unlink()


async def test_promoted_media_waits_for_the_run_of_tool_results() -> None:
    msg = AssistantMsg(
        "assistant",
        [
            ToolCallBlock(id="a", name="f", input="{}"),
            ToolCallBlock(id="b", name="f", input="{}"),
            ToolResultBlock(id="a", name="f", output=[image("b64", "IA")]),
            ToolResultBlock(id="b", name="f", output="plain"),
            TextBlock(text="done"),
        ],
    )

    out = await OpenAIChatFormatter().format([msg])

    assert [(m["role"], m.get("name")) for m in out] == [
        ("assistant", "assistant"),
        ("tool", "f"),
        ("tool", "f"),
        ("user", "system-reminder"),
        ("assistant", "assistant"),
    ]


async def test_empty_and_edge_messages() -> None:
    out = await OpenAIChatFormatter().format(
        [
            AssistantMsg("assistant", []),
            AssistantMsg("a", [ThinkingBlock(thinking="only thinking")]),
            AssistantMsg("a", [HintBlock(hint=[])]),
            UserMsg("u", ""),
        ]
    )

    assert out == [{"role": "user", "name": "u", "content": [{"type": "text", "text": ""}]}]


async def test_format_requires_a_list_of_msgs() -> None:
    with pytest.raises(TypeError, match="list of Msg"):
        await OpenAIChatFormatter().format("hello")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        await OpenAIMultiAgentFormatter().format([{"role": "user"}])  # type: ignore[list-item]


def test_input_types_and_supported_media() -> None:
    formatter = OpenAIChatFormatter()

    assert formatter.supported_input_media_types == ["image/*", "audio/*", "application/pdf"]
    assert formatter.is_supported("image/webp")
    assert not formatter.is_supported("video/mp4")
    assert FormatterBase(["text/plain", "application/x-thinking"]).supported_input_media_types == []
    assert "input_types" in repr(formatter)


async def test_base_format_is_abstract() -> None:
    with pytest.raises(NotImplementedError):
        await FormatterBase().format([])


# -- multi-agent ---------------------------------------------------------------------------


async def test_multi_agent_media_only_group_and_custom_prompt() -> None:
    formatter = OpenAIMultiAgentFormatter(conversation_history_prompt="HISTORY:\n")
    msgs = [
        UserMsg("u", [image("b64", "X")]),
        AssistantMsg("a", [ToolCallBlock(id="c", name="t", input="{}")]),
        UserMsg("u", "text now"),
        AssistantMsg("a", [ThinkingBlock(thinking="ignored")]),
    ]

    out = await formatter.format(msgs)

    assert out[0] == {
        "role": "user",
        "content": [
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{B64}"}},
        ],
    }
    assert out[2] == {
        "role": "user",
        "content": [{"type": "text", "text": "<history>\nu: text now\n</history>"}],
    }
    assert len(out) == 3


async def test_multi_agent_prompt_only_after_output_and_late_system() -> None:
    msgs = [
        SystemMsg("system", [TextBlock(text="A"), TextBlock(text="B")]),
        AssistantMsg("a", [ThinkingBlock(thinking="nothing to show")]),
        AssistantMsg("a", [ToolCallBlock(id="c", name="t", input="{}")]),
        SystemMsg("late", "later system"),
    ]

    out = await OpenAIMultiAgentFormatter().format(msgs)

    assert out[0] == {"role": "system", "content": "A\nB"}
    assert out[-1]["content"][0]["text"].startswith("# Conversation History\n")
    assert out[-1]["content"][0]["text"].endswith("<history>\nlate: later system\n</history>")


def test_group_messages() -> None:
    groups = FormatterBase.group_messages(two_groups())

    assert [(kind, [m.name for m in ms]) for kind, ms in groups] == [
        ("agent_message", ["alice", "bob"]),
        ("tool_sequence", ["bob"]),
        ("agent_message", ["carol"]),
    ]


# -- edges beyond the golden cases ---------------------------------------------------------------


@pytest.mark.parametrize("cls", [OpenAIChatFormatter, MoonshotChatFormatter], ids=str)
@pytest.mark.parametrize("media_type", ["audio/ogg", "audio/flac"])
async def test_openai_audio_other_than_wav_mp3_is_a_type_error(
    cls: type[FormatterBase], media_type: str
) -> None:
    # wav/mp3/mpeg only, else TypeError.
    audio = DataBlock(source=Base64Source(data="T2dnUw==", media_type=media_type))
    with pytest.raises(TypeError, match="unsupported audio format"):
        await cls().format([UserMsg("u", [TextBlock(text="listen"), audio])])


@pytest.mark.parametrize("media_type", ["audio/wav", "audio/mpeg"])
async def test_openai_wav_and_mpeg_audio_formats(media_type: str) -> None:
    audio = DataBlock(source=Base64Source(data="UklGRg==", media_type=media_type))
    out = await OpenAIChatFormatter().format([UserMsg("u", [audio])])
    part = out[0]["content"][0]
    assert part == {
        "type": "input_audio",
        "input_audio": {"data": "UklGRg==", "format": "wav" if "wav" in media_type else "mp3"},
    }


# -- contexts the providers reject (HTTP 400) ----------------------------------------------------

#: OpenAI's current ``name`` pattern (the older one was ``^[a-zA-Z0-9_-]+$``).
OPENAI_NAME = r"^[^\s<|\\/>]+$"
NAMED = [
    OpenAIChatFormatter,
    OpenAIMultiAgentFormatter,
    MoonshotChatFormatter,
    MoonshotMultiAgentFormatter,
]


@pytest.mark.parametrize("cls", NAMED, ids=lambda c: c.__name__)
async def test_openai_message_names_match_the_api_pattern(cls: type[FormatterBase]) -> None:
    msgs = [
        UserMsg("John Doe", "hi"),
        AssistantMsg(
            "Research Assistant",
            [
                ToolCallBlock(id="c1", name="search", input="{}"),
                ToolResultBlock(id="c1", name="search", output="ok"),
            ],
        ),
        AssistantMsg("小明", [search_call("c2"), search_result("c2")]),
        AssistantMsg("Dr. O'Brien: MD", [search_call("c3"), search_result("c3")]),
    ]
    out = await cls().format(msgs)
    for message in out:
        if "name" in message:
            assert re.match(OPENAI_NAME, message["name"]), message
            assert re.fullmatch(r"[A-Za-z0-9_-]+", message["name"]), message


@pytest.mark.parametrize("cls", [OpenAIChatFormatter, MoonshotChatFormatter], ids=str)
@pytest.mark.parametrize(
    ("name", "sent"),
    [
        ("John Doe", "John_Doe"),
        ("Dr. O'Brien: MD", "Dr_O_Brien_MD"),
        ("小明 bot", "bot"),
        ("agent_1-b", "agent_1-b"),  # already valid: byte-identical
        ("_private_", "_private_"),
        ("小明", None),  # nothing left: no name
        ("", None),
    ],
)
async def test_openai_names_are_sanitised_and_valid_names_kept(
    cls: type[FormatterBase], name: str, sent: str | None
) -> None:
    (message,) = await cls().format([UserMsg(name, "hi")])
    assert message.get("name") == sent
    assert list(message)[:2] == (["role", "name"] if sent else ["role", "content"])


@pytest.mark.parametrize("cls", [OpenAIChatFormatter, MoonshotChatFormatter], ids=str)
@pytest.mark.parametrize("media_type", ["audio/ogg", "audio/flac"])
async def test_tool_returned_ogg_audio_does_not_break_every_later_request(
    cls: type[FormatterBase], media_type: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    audio = DataBlock(source=Base64Source(data="T2dnUw==", media_type=media_type))
    msgs = [
        AssistantMsg(
            "a",
            [
                ToolCallBlock(id="c1", name="record", input="{}"),
                ToolResultBlock(id="c1", name="record", output=[TextBlock(text="recorded"), audio]),
            ],
        ),
        UserMsg("u", "thanks"),
    ]
    out = await cls().format(msgs)
    assert_tool_pairing(cls, out)
    text = dumped(out)
    assert "recorded" in text
    # Described like other media the provider cannot take: saved, and its path given.
    (saved,) = tmp_path.iterdir()
    assert saved.read_bytes() == base64.b64decode("T2dnUw==")
    assert str(saved) in text
    assert "input_audio" not in text


@pytest.mark.parametrize("cls", [OpenAIChatFormatter, MoonshotChatFormatter], ids=str)
async def test_tool_returned_wav_audio_is_still_presented(cls: type[FormatterBase]) -> None:
    audio = DataBlock(source=Base64Source(data="UklGRg==", media_type="audio/wav"))
    out = await cls().format([AssistantMsg("a", [search_call(), search_result(output=[audio])])])
    assert out[-1]["role"] == "user"
    assert {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}} in out[-1][
        "content"
    ]


# -- text_as_string: plain-string content for local servers ---------------------------------------


def _as_string(message: dict[str, Any]) -> dict[str, Any]:
    """What ``text_as_string`` makes of a default-formatted message: text-only part lists
    joined by newlines, ``None`` content as ``""``, everything else unchanged."""
    content = message.get("content", "absent")
    if content is None:
        return {**message, "content": ""}
    if isinstance(content, list) and all(p["type"] == "text" for p in content):
        return {**message, "content": "\n".join(p["text"] for p in content)}
    return message


@pytest.mark.parametrize("case", sorted(CASES))
async def test_text_as_string_changes_only_text_only_content(case: str) -> None:
    formatter_cls, build = CASES[case]

    out = await formatter_cls(text_as_string=True).format(build())

    assert out == [_as_string(m) for m in golden_cases()[case]]


async def test_text_as_string_sends_every_text_message_as_a_string() -> None:
    msgs = [
        SystemMsg("system", "Be brief."),
        UserMsg("user", [TextBlock(text="first line"), TextBlock(text="second line")]),
        AssistantMsg(
            "assistant",
            [
                ToolCallBlock(id="c1", name="lookup", input="{}"),
                ToolResultBlock(id="c1", name="lookup", output=[TextBlock(text="sunny")]),
                HintBlock(hint="Answer in one word."),
                HintBlock(hint=[TextBlock(text="Still one word.")]),
                TextBlock(text="Sunny."),
            ],
        ),
    ]

    out = await OpenAIChatFormatter(text_as_string=True).format(msgs)

    assert [(m["role"], m["content"]) for m in out] == [
        ("system", "Be brief."),
        ("user", "first line\nsecond line"),
        ("assistant", ""),  # next to its tool call: "" rather than null
        ("tool", "sunny"),
        ("user", "Answer in one word."),
        ("user", "Still one word."),
        ("assistant", "Sunny."),
    ]
    assert out[2]["tool_calls"][0]["function"] == {"name": "lookup", "arguments": "{}"}


async def test_text_as_string_keeps_parts_when_there_is_media() -> None:
    msgs = [
        UserMsg("user", [TextBlock(text="What is this?"), image("b64", "I")]),
        AssistantMsg("assistant", [HintBlock(hint=[TextBlock(text="Look:"), image("b64", "H")])]),
    ]

    out = await OpenAIChatFormatter(text_as_string=True).format(msgs)

    assert [[p["type"] for p in m["content"]] for m in out] == [
        ["text", "image_url"],
        ["text", "image_url"],
    ]


async def test_text_as_string_multi_agent_history_is_a_string() -> None:
    formatter = OpenAIMultiAgentFormatter(text_as_string=True)

    out = await formatter.format(two_groups())

    assert all(isinstance(m["content"], str) for m in out if m["role"] != "assistant")
    assert "text_as_string=True" in repr(OpenAIChatFormatter(text_as_string=True))
    assert "text_as_string=False" in repr(OpenAIChatFormatter())
