"""What every formatter (trioagent/formatter/) does with inputs beyond the golden cases.

Every chat and multi-agent formatter gets inputs the golden cases (tests/golden_formatters.jsonl)
do not cover: empty lists and messages, media that is missing, relative, remote, unsupported or
not base64, tool results that hold media, interrupted (partial) tool calls, unparseable tool
input, hints made of blocks, thinking with and without provider signatures, long and non-ASCII
text, repeated roles, a system message in the middle and multi-agent speaker names with spaces
and unicode.  The expected behaviour is AgentScope's where it defines one, otherwise what the
provider API accepts without losing anything of the input.  Edges of one provider's format are
in that provider's test module.
"""

from __future__ import annotations

import base64
import copy
import json
import tempfile
import urllib.parse
from pathlib import Path
from typing import Any

import httpx2
import pytest
from formatter_kit import (
    OPENAI_LIKE,
    PNG_B64,
    assert_tool_pairing,
    dumped,
    png_image,
    search_call,
    search_result,
)

from trioagent.formatter import (
    AnthropicChatFormatter,
    AnthropicMultiAgentFormatter,
    DashScopeChatFormatter,
    DashScopeMultiAgentFormatter,
    DeepSeekChatFormatter,
    DeepSeekMultiAgentFormatter,
    FormatterBase,
    GeminiChatFormatter,
    GeminiMultiAgentFormatter,
    MoonshotChatFormatter,
    MoonshotMultiAgentFormatter,
    OllamaChatFormatter,
    OllamaMultiAgentFormatter,
    OpenAIChatFormatter,
    OpenAIMultiAgentFormatter,
    OpenAIResponseFormatter,
    OpenAIResponseMultiAgentFormatter,
    XAIChatFormatter,
    XAIMultiAgentFormatter,
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
    URLSource,
    UserMsg,
)

CHAT: list[type[FormatterBase]] = [
    OpenAIChatFormatter,
    OpenAIResponseFormatter,
    AnthropicChatFormatter,
    GeminiChatFormatter,
    DashScopeChatFormatter,
    DeepSeekChatFormatter,
    MoonshotChatFormatter,
    XAIChatFormatter,
    OllamaChatFormatter,
]
MULTI: list[type[FormatterBase]] = [
    OpenAIMultiAgentFormatter,
    OpenAIResponseMultiAgentFormatter,
    AnthropicMultiAgentFormatter,
    GeminiMultiAgentFormatter,
    DashScopeMultiAgentFormatter,
    DeepSeekMultiAgentFormatter,
    MoonshotMultiAgentFormatter,
    XAIMultiAgentFormatter,
    OllamaMultiAgentFormatter,
]
ALL = CHAT + MULTI

#: Accepted by every formatter: text and images (DeepSeek defaults to text only).
WITH_IMAGES = ["text/plain", "image/*"]
INTERRUPTED = "<system-reminder>The tool call has been interrupted by the user.</system-reminder>"

chat_formatters = pytest.mark.parametrize("cls", CHAT, ids=lambda c: c.__name__)
all_formatters = pytest.mark.parametrize("cls", ALL, ids=lambda c: c.__name__)
multi_formatters = pytest.mark.parametrize("cls", MULTI, ids=lambda c: c.__name__)


def url_block(url: str, media_type: str, block_id: str = "D") -> DataBlock:
    return DataBlock(id=block_id, source=URLSource(url=url, media_type=media_type))


def texts_of(out: list[dict[str, Any]]) -> list[str]:
    """Every string value in the payload (deep)."""
    found: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, str):
            found.append(value)
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(out)
    return found


# -- empty input ---------------------------------------------------------------------------------


@all_formatters
async def test_empty_list_gives_empty_payload(cls: type[FormatterBase]) -> None:
    assert await cls().format([]) == []


@all_formatters
async def test_non_list_input_is_a_type_error(cls: type[FormatterBase]) -> None:
    with pytest.raises(TypeError):
        await cls().format((UserMsg("u", "hi"),))  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        await cls().format([{"role": "user", "content": "hi"}])  # type: ignore[list-item]


@chat_formatters
async def test_message_without_blocks_sends_nothing(cls: type[FormatterBase]) -> None:
    msgs = [Msg("u", [], "user"), Msg("a", [], "assistant")]
    assert await cls().format(msgs) == []


@chat_formatters
async def test_empty_messages_between_turns_leave_the_turns_intact(
    cls: type[FormatterBase],
) -> None:
    msgs = [UserMsg("u", "first"), Msg("a", [], "assistant"), UserMsg("u", "second")]
    assert await cls().format(msgs) == await cls().format([msgs[0], msgs[2]])


@chat_formatters
async def test_empty_hint_list_sends_nothing(cls: type[FormatterBase]) -> None:
    plain = await cls().format([AssistantMsg("a", "answer")])
    with_hint = await cls().format(
        [AssistantMsg("a", [TextBlock(text="answer"), HintBlock(hint=[])])]
    )
    assert with_hint == plain


# -- file:// URLs --------------------------------------------------------------------------------


@all_formatters
async def test_missing_file_url_is_a_file_not_found_error(cls: type[FormatterBase]) -> None:
    # As AgentScope (which open()s the path): a clear, typed error, not a silent skip.
    block = url_block("file:///nonexistent/trioagent-edge/x.png", "image/png")
    msgs = [Msg("u", [TextBlock(text="look"), block], "user")]
    with pytest.raises(FileNotFoundError):
        await cls(input_types=WITH_IMAGES).format(msgs)


@all_formatters
async def test_relative_file_url_is_read_from_the_working_directory(
    cls: type[FormatterBase], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "pics").mkdir()
    (tmp_path / "pics" / "a.png").write_bytes(b"relative png")
    monkeypatch.chdir(tmp_path)
    msgs = [Msg("u", [TextBlock(text="look"), url_block("file://pics/a.png", "image/png")], "user")]
    out = await cls(input_types=WITH_IMAGES).format(msgs)
    assert base64.b64encode(b"relative png").decode() in dumped(out)


@chat_formatters
async def test_file_url_with_percent_encoded_unicode_path(
    cls: type[FormatterBase], tmp_path: Path
) -> None:
    path = tmp_path / "my pic 🖼 é.png"
    path.write_bytes(b"unicode png")
    url = "file://" + urllib.parse.quote(str(path))
    msgs = [Msg("u", [TextBlock(text="look"), url_block(url, "image/png")], "user")]
    out = await cls(input_types=WITH_IMAGES).format(msgs)
    assert base64.b64encode(b"unicode png").decode() in dumped(out)


# -- remote URLs ---------------------------------------------------------------------------------


class _Recorder:
    def __init__(self) -> None:
        self.urls: list[str] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.urls.append(str(request.url))
        return httpx2.Response(200, content=b"remote bytes")


REMOTE_B64 = base64.b64encode(b"remote bytes").decode()


REMOTE_URL = "https://media.example.com/pic.png"
REMOTE_CASES = [
    *[(cls, where) for cls in ALL for where in ("message", "tool_result")],
    # Multi-agent formatters ignore hints of plain (non-tool) messages (AgentScope does the same).
    *[(cls, "hint") for cls in CHAT],
]


@pytest.mark.parametrize(
    ("cls", "where"), REMOTE_CASES, ids=[f"{c.__name__}-{w}" for c, w in REMOTE_CASES]
)
async def test_remote_image_uses_the_given_http_client(
    cls: type[FormatterBase], where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    block = url_block(REMOTE_URL, "image/png")
    if where == "message":
        msgs = [UserMsg("u", [TextBlock(text="look"), block])]
    elif where == "tool_result":
        msgs = [
            AssistantMsg("a", [search_call(), search_result(output=[TextBlock(text="see"), block])])
        ]
    else:
        hint = HintBlock(hint=[TextBlock(text="h"), block])
        msgs = [AssistantMsg("a", [TextBlock(text="t"), hint])]
    recorder = _Recorder()
    async with httpx2.AsyncClient(transport=httpx2.MockTransport(recorder)) as client:
        out = await cls(input_types=WITH_IMAGES).format(msgs, http_client=client)
    text = dumped(out)
    # Either passed on by URL, or downloaded through the client the model passed in.
    assert REMOTE_URL in text or REMOTE_B64 in text
    if REMOTE_B64 in text:
        assert recorder.urls
        assert set(recorder.urls) == {REMOTE_URL}


@pytest.mark.parametrize(
    "cls", [AnthropicChatFormatter, GeminiChatFormatter, OllamaChatFormatter], ids=str
)
async def test_failed_download_is_a_value_error(cls: type[FormatterBase]) -> None:
    def not_found(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(404)

    msgs = [UserMsg("u", [TextBlock(text="look"), url_block("https://x.test/a.png", "image/png")])]
    async with httpx2.AsyncClient(transport=httpx2.MockTransport(not_found)) as client:
        with pytest.raises(ValueError, match="could not download"):
            await cls().format(msgs, http_client=client)


# -- media types ---------------------------------------------------------------------------------


@all_formatters
async def test_unsupported_media_type_is_skipped_and_the_text_kept(
    cls: type[FormatterBase],
) -> None:
    zipped = DataBlock(source=Base64Source(data="UEsDBA==", media_type="application/zip"))
    out = await cls().format([UserMsg("u", [TextBlock(text="keep me"), zipped])])
    text = dumped(out)
    assert "keep me" in text
    assert "UEsDBA==" not in text


VIDEO_SENDERS = {
    GeminiChatFormatter,
    GeminiMultiAgentFormatter,
    DashScopeChatFormatter,
    DashScopeMultiAgentFormatter,
    MoonshotChatFormatter,
    MoonshotMultiAgentFormatter,
}


@all_formatters
async def test_video_only_reaches_providers_that_take_video(cls: type[FormatterBase]) -> None:
    # Video goes to Gemini, DashScope and Moonshot only.
    video = DataBlock(source=Base64Source(data="AAAAIGZ0eXA=", media_type="video/mp4"))
    out = await cls().format([UserMsg("u", [TextBlock(text="watch"), video])])
    assert ("AAAAIGZ0eXA=" in dumped(out)) == (cls in VIDEO_SENDERS)


@chat_formatters
async def test_invalid_base64_is_passed_on_not_dropped(cls: type[FormatterBase]) -> None:
    # The formatters do not validate base64 (the provider does): nothing crashes and nothing
    # is silently dropped.
    bad = png_image(data="!!not*base64")
    out = await cls(input_types=WITH_IMAGES).format([UserMsg("u", [TextBlock(text="x"), bad])])
    assert "!!not*base64" in dumped(out)


# -- tool results --------------------------------------------------------------------------------


@chat_formatters
async def test_tool_result_with_media_keeps_text_and_media(
    cls: type[FormatterBase], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    output: list[TextBlock | DataBlock] = [TextBlock(text="see the chart"), png_image()]
    msgs = [
        UserMsg("u", "plot it"),
        AssistantMsg("a", [search_call(), search_result(output=output)]),
    ]
    out = await cls().format(msgs)
    assert_tool_pairing(cls, out)
    text = dumped(out)
    assert "see the chart" in text
    if cls is DeepSeekChatFormatter:  # text-only: the image is saved and its path given
        (saved,) = tmp_path.iterdir()
        assert saved.read_bytes() == b"fake image bytes"
        assert str(saved) in text
    else:
        assert PNG_B64 in text


@pytest.mark.parametrize(
    "cls",
    [
        OpenAIChatFormatter,
        OpenAIResponseFormatter,
        AnthropicChatFormatter,
        DeepSeekChatFormatter,
        XAIChatFormatter,
        OllamaChatFormatter,
    ],
    ids=lambda c: c.__name__,
)
async def test_unsupported_remote_media_in_tool_result_is_described_by_url(
    cls: type[FormatterBase],
) -> None:
    video = url_block("https://media.example.com/clip.mp4", "video/mp4")
    out = await cls().format([AssistantMsg("a", [search_call(), search_result(output=[video])])])
    assert_tool_pairing(cls, out)
    assert "https://media.example.com/clip.mp4" in dumped(out)


@chat_formatters
@pytest.mark.parametrize("output", ["", []], ids=["str", "list"])
async def test_empty_tool_output_still_answers_the_call(
    cls: type[FormatterBase], output: str | list[TextBlock | DataBlock]
) -> None:
    out = await cls().format([AssistantMsg("a", [search_call(), search_result(output=output)])])
    assert_tool_pairing(cls, out)
    if cls is AnthropicChatFormatter:  # Anthropic rejects an empty tool_result
        assert out[-1]["content"][0]["content"] == [{"type": "text", "text": "(empty tool output)"}]


@chat_formatters
async def test_interrupted_partial_tool_call_is_answered(cls: type[FormatterBase]) -> None:
    # An interrupted stream saves the partial call; the cleanup answers it.
    msgs = [
        UserMsg("u", "weather in Tokyo?"),
        AssistantMsg(
            "a",
            [
                TextBlock(text="let me check"),
                search_call("c1", '{"city": "Tok'),
                search_call("c2", ""),
                search_result("c1", INTERRUPTED, state="interrupted"),
                search_result("c2", INTERRUPTED, state="interrupted"),
            ],
        ),
        UserMsg("u", "never mind"),
    ]
    out = await cls().format(msgs)
    assert_tool_pairing(cls, out)
    assert dumped(out).count("interrupted by the user") == 2
    assert "never mind" in dumped(out)


@chat_formatters
async def test_parallel_results_in_completion_order(cls: type[FormatterBase]) -> None:
    msgs = [
        AssistantMsg(
            "a",
            [
                search_call("c1"),
                search_call("c2"),
                search_result("c2", "two"),
                search_result("c1", "one"),
            ],
        )
    ]
    out = await cls().format(msgs)
    assert_tool_pairing(cls, out)


@pytest.mark.parametrize(
    "cls", [AnthropicChatFormatter, GeminiChatFormatter, OllamaChatFormatter], ids=str
)
@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ('{"city": "Tok', {"city": "Tok"}),
        ("", {}),
        ("not json at all", {}),
        ("[1, 2]", {}),
        ('{"x": NaN}', {}),
    ],
)
async def test_object_only_providers_get_a_json_object(
    cls: type[FormatterBase], arguments: str, expected: dict[str, Any]
) -> None:
    # Repaired when possible, else {} with a warning (the documented deviation: AgentScope
    # raises, which would fail every later request of the conversation).
    out = await cls().format(
        [AssistantMsg("a", [search_call("c1", arguments), search_result("c1")])]
    )
    if cls is AnthropicChatFormatter:
        sent = out[0]["content"][0]["input"]
    elif cls is GeminiChatFormatter:
        sent = out[0]["parts"][0]["function_call"]["args"]
    else:
        sent = out[0]["tool_calls"][0]["function"]["arguments"]
    assert sent == expected


@pytest.mark.parametrize(
    "cls", [*sorted(OPENAI_LIKE, key=lambda c: c.__name__), OpenAIResponseFormatter], ids=str
)
async def test_string_argument_providers_get_the_input_verbatim(cls: type[FormatterBase]) -> None:
    out = await cls().format([AssistantMsg("a", [search_call("c1", '{"city": "Tok')])])
    assert '{"city": "Tok' in texts_of(out)


# -- hints ---------------------------------------------------------------------------------------


@chat_formatters
async def test_hint_of_blocks_becomes_a_user_turn_after_the_assistant_turn(
    cls: type[FormatterBase],
) -> None:
    hint = HintBlock(hint=[TextBlock(text="look at this"), png_image()])
    out = await cls(input_types=WITH_IMAGES).format(
        [AssistantMsg("a", [TextBlock(text="answer"), hint])]
    )
    assert len(out) == 2
    assert out[0]["role"] in ("assistant", "model")
    assert out[1]["role"] == "user"
    last = dumped([out[1]])
    assert "look at this" in last
    assert PNG_B64 in last


@chat_formatters
async def test_hint_after_parallel_results_follows_every_tool_answer(
    cls: type[FormatterBase],
) -> None:
    # A background task's completion arrives as a hint on the tail message.
    hint = HintBlock(hint="background task finished")
    msgs = [
        AssistantMsg(
            "a",
            [search_call("c1"), search_call("c2"), search_result("c1"), search_result("c2"), hint],
        )
    ]
    out = await cls().format(msgs)
    assert_tool_pairing(cls, out)
    assert out[-1]["role"] == "user"
    assert "background task finished" in dumped([out[-1]])


@chat_formatters
async def test_hint_before_the_model_output_stays_first(cls: type[FormatterBase]) -> None:
    # The runtime-state hint is the first block of the reply message.
    hint = HintBlock(hint="<current-time>now</current-time>")
    msgs = [UserMsg("u", "hi"), AssistantMsg("a", [hint, TextBlock(text="hello")])]
    out = await cls().format(msgs)
    order = [s for s in texts_of(out) if s in ("hi", "<current-time>now</current-time>", "hello")]
    assert order == ["hi", "<current-time>now</current-time>", "hello"]


# -- thinking ----------------------------------------------------------------------------------

THINKING_KEPT = {GeminiChatFormatter, DeepSeekChatFormatter, MoonshotChatFormatter}


@chat_formatters
async def test_unsigned_thinking_policy(cls: type[FormatterBase]) -> None:
    # Only Gemini (thought parts) and DeepSeek / Moonshot
    # (reasoning_content) replay thinking without a provider signature.
    msgs = [UserMsg("u", "q"), AssistantMsg("a", [ThinkingBlock(thinking="my plan")])]
    out = await cls().format(msgs)
    assert ("my plan" in texts_of(out)) == (cls in THINKING_KEPT)


# -- text ----------------------------------------------------------------------------------------

ODD_TEXT = 'naïve café — 東京 👩‍👩‍👧 e\u0301 \u200b\t"quotes" \\ </history> <|im_end|>'


@all_formatters
async def test_long_and_non_ascii_text_survives_exactly(cls: type[FormatterBase]) -> None:
    long_text = ODD_TEXT + "x" * 300_000 + ODD_TEXT
    out = await cls().format([UserMsg("u", "short"), AssistantMsg("a", long_text)])
    assert any(long_text in s for s in texts_of(json.loads(json.dumps(out, default=repr))))


@chat_formatters
async def test_repeated_roles_keep_every_message(cls: type[FormatterBase]) -> None:
    msgs = [
        UserMsg("u", "u1"),
        UserMsg("u", "u2"),
        AssistantMsg("a", "a1"),
        AssistantMsg("a", "a2"),
        UserMsg("u", "u3"),
    ]
    strings = texts_of(await cls().format(msgs))
    for text in ("u1", "u2", "a1", "a2", "u3"):
        assert strings.count(text) == 1


@chat_formatters
async def test_system_message_in_the_middle_is_kept_in_place(cls: type[FormatterBase]) -> None:
    msgs = [
        SystemMsg("system", "S1"),
        UserMsg("u", "q"),
        SystemMsg("system", "S2"),
        AssistantMsg("a", "r"),
    ]
    strings = [s for s in texts_of(await cls().format(msgs)) if s in ("S1", "q", "S2", "r")]
    assert strings == ["S1", "q", "S2", "r"]


@multi_formatters
async def test_multi_agent_later_system_message_is_a_history_line(cls: type[FormatterBase]) -> None:
    # Only index 0 is special.
    msgs = [
        SystemMsg("system", "S1"),
        UserMsg("u", "q"),
        SystemMsg("system", "S2"),
        AssistantMsg("a", "r"),
    ]
    out = await cls().format(msgs)
    assert len(out) == 2
    assert "S1" in dumped([out[0]])
    history = dumped([out[1]])
    for text in ("q", "S2", "r"):
        assert text in history


@multi_formatters
async def test_multi_agent_names_with_spaces_and_unicode(cls: type[FormatterBase]) -> None:
    msgs = [
        SystemMsg("system", "You are in a group chat."),
        UserMsg("Alice Smith", "héllo 👋"),
        AssistantMsg("小明 bot", "回答 🎉"),
        AssistantMsg("Dr. O'Brien: MD", "line one\nline two"),
    ]
    out = await cls().format(msgs)
    history = "\n".join(texts_of(out[1:]))
    for name, text in [
        ("Alice Smith", "héllo 👋"),
        ("小明 bot", "回答 🎉"),
        ("Dr. O'Brien: MD", "line one\nline two"),
    ]:
        assert f"{name}:" in history
        assert text in history
        assert history.index(f"{name}:") < history.index(text)


@multi_formatters
async def test_multi_agent_tool_run_between_histories_is_paired(cls: type[FormatterBase]) -> None:
    msgs = [
        UserMsg("Alice", "find it"),
        AssistantMsg("Bob", [TextBlock(text="searching"), search_call(), search_result()]),
        AssistantMsg("Carol", "found"),
    ]
    out = await cls().format(msgs)
    chat_cls = type(cls()._chat_formatter())  # type: ignore[attr-defined]
    tool_run = await chat_cls().format([msgs[1]])
    assert_tool_pairing(chat_cls, tool_run)
    # The tool run is the chat formatter's output, verbatim, between the two histories.
    assert out[-1 - len(tool_run) : -1] == tool_run
    assert "find it" in dumped(out[: -1 - len(tool_run)])
    assert "found" in dumped([out[-1]])


# -- no side effects -----------------------------------------------------------------------------


@all_formatters
async def test_format_neither_mutates_its_input_nor_depends_on_earlier_calls(
    cls: type[FormatterBase],
) -> None:
    msgs = [
        SystemMsg("system", "sys"),
        UserMsg("u", "q"),
        AssistantMsg(
            "a",
            [
                HintBlock(hint=[TextBlock(text="h")]),
                ThinkingBlock(thinking="t", extra={"signature": "s"}),
                TextBlock(text="x"),
                search_call(),
                search_result(output=[TextBlock(text="r")]),
                TextBlock(text="done"),
            ],
        ),
    ]
    before = copy.deepcopy(msgs)
    formatter = cls()
    first = await formatter.format(msgs)
    second = await formatter.format(msgs)
    assert msgs == before
    assert dumped(first) == dumped(second)


# -- media in assistant turns (the APIs reject it) ---------------------------------------------

ASSISTANT_MEDIA_MOVERS: list[type[FormatterBase]] = [
    OpenAIChatFormatter,
    OpenAIResponseFormatter,
    AnthropicChatFormatter,
    MoonshotChatFormatter,
    DashScopeChatFormatter,
]
ASSISTANT_PART_TYPES = {
    "text",
    "output_text",
    "refusal",
    "thinking",
    "redacted_thinking",
    "tool_use",
}


def assistant_turns_hold_no_media(out: list[dict[str, Any]]) -> None:
    for message in out:
        if message.get("role") == "assistant" and isinstance(message.get("content"), list):
            for part in message["content"]:
                assert part["type"] in ASSISTANT_PART_TYPES, message


@pytest.mark.parametrize("cls", ASSISTANT_MEDIA_MOVERS, ids=lambda c: c.__name__)
async def test_no_media_parts_in_assistant_turns(cls: type[FormatterBase]) -> None:
    msgs = [
        UserMsg("u", "draw a cat"),
        AssistantMsg("painter", [TextBlock(text="here it is"), png_image()]),
        UserMsg("u", "describe it"),
    ]
    out = await cls().format(msgs)
    assistant_turns_hold_no_media(out)
    # Moved to a user turn right after the assistant turn, not lost.
    assert [m["role"] for m in out] == ["user", "assistant", "user", "user"]
    moved = dumped([out[2]])
    assert PNG_B64 in moved
    assert "previous assistant message of painter" in moved
    assert "describe it" in dumped([out[3]])


@pytest.mark.parametrize("cls", ASSISTANT_MEDIA_MOVERS, ids=lambda c: c.__name__)
async def test_assistant_media_follows_its_tool_results(cls: type[FormatterBase]) -> None:
    msgs = [
        UserMsg("u", "draw and save"),
        AssistantMsg("a", [TextBlock(text="drawn"), png_image(), search_call(), search_result()]),
    ]
    out = await cls().format(msgs)
    assistant_turns_hold_no_media(out)
    assert_tool_pairing(cls, out)
    assert out[-1]["role"] == "user"
    assert PNG_B64 in dumped([out[-1]])
    assert PNG_B64 not in dumped(out[:-1])
