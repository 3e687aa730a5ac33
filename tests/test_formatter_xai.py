"""xAI formatters (trioagent/formatter/_xai.py).

AgentScope has no golden case for xAI (its formatter builds gRPC proto messages); these
tests pin the REST JSON mapping documented in the module.
"""

from __future__ import annotations

import base64
import json
from functools import partial
from pathlib import Path

import pytest
import trio
from golden_inputs import B64, IMG_URL, b64_image as png, complex_msgs as plain_complex_msgs

from trioagent.formatter import XAIChatFormatter, XAIMultiAgentFormatter
from trioagent.message import (
    AssistantMsg,
    Base64Source,
    DataBlock,
    HintBlock,
    Msg,
    SystemMsg,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    URLSource,
    UserMsg,
)
from trioagent.testing import OpenAICompatibleServer, serve_openai_compatible


def text_part(text: str) -> dict[str, str]:
    return {"type": "text", "text": text}


def image_part(url: str) -> dict[str, object]:
    return {"type": "image_url", "image_url": {"url": url}}


def complex_msgs() -> list[Msg]:
    """The shared COMPLEX turn with a second text block, ``more``, right after ``text_2``."""
    (msg,) = plain_complex_msgs()
    after = [getattr(block, "text", None) for block in msg.content].index("text_2") + 1
    msg.content.insert(after, TextBlock(text="more"))
    return [msg]


def tool_call(n: int) -> dict[str, object]:
    return {
        "id": f"call_{n}",
        "type": "function",
        "function": {"name": f"func_{n}", "arguments": f'{{"arg": "value{n}"}}'},
    }


def tool(n: int) -> dict[str, str]:
    return {"role": "tool", "tool_call_id": f"call_{n}", "content": f"result_{n}"}


async def test_conversation_with_system_user_image_and_tools() -> None:
    msgs = [
        SystemMsg("system", "You're a helpful assistant."),
        UserMsg(
            "user",
            [
                TextBlock(text="What is in this map?"),
                DataBlock(source=URLSource(url=IMG_URL, media_type="image/png")),
                png(),
            ],
        ),
        AssistantMsg("assistant", "A city."),
    ]

    out = await XAIChatFormatter().format(msgs)

    assert out == [
        {"role": "system", "content": "You're a helpful assistant."},
        {
            "role": "user",
            "content": [
                text_part("What is in this map?"),
                image_part(IMG_URL),
                image_part(f"data:image/png;base64,{B64}"),
            ],
        },
        {"role": "assistant", "content": "A city."},
    ]


async def test_complex_assistant_turn() -> None:
    out = await XAIChatFormatter().format(complex_msgs())

    assert json.dumps(out) == json.dumps(
        [
            {"role": "assistant", "content": "text_1", "tool_calls": [tool_call(1), tool_call(2)]},
            tool(1),
            tool(2),
            {"role": "assistant", "content": "text_2\nmore", "tool_calls": [tool_call(3)]},
            tool(3),
            {"role": "assistant", "content": "", "tool_calls": [tool_call(4)]},  # never null
            tool(4),
            {"role": "assistant", "content": "text_3"},
        ]
    )


async def test_hints_split_user_and_assistant_messages() -> None:
    msgs = [
        UserMsg("user", [TextBlock(text="before"), TextBlock(text="b2")]),
        AssistantMsg(
            "assistant",
            [
                TextBlock(text="Let me think."),
                HintBlock(hint="Be concise."),
                HintBlock(hint=[TextBlock(text="Inspect:"), png()]),
                HintBlock(hint=[]),
                TextBlock(text="Answer."),
            ],
        ),
    ]

    out = await XAIChatFormatter().format(msgs)

    assert out == [
        {"role": "user", "content": [text_part("before"), text_part("b2")]},
        {"role": "assistant", "content": "Let me think."},
        {"role": "user", "content": [text_part("Be concise.")]},
        {
            "role": "user",
            "content": [text_part("Inspect:"), image_part(f"data:image/png;base64,{B64}")],
        },
        {"role": "assistant", "content": "Answer."},
    ]


async def test_tool_result_images_follow_the_run_of_tool_results() -> None:
    msg = AssistantMsg(
        "assistant",
        [
            ToolCallBlock(id="a", name="get_map", input='{"city": "Tokyo"}'),
            ToolCallBlock(id="b", name="f", input="{}"),
            ToolResultBlock(
                id="a", name="get_map", output=[TextBlock(text="Here is the map."), png("IMGID")]
            ),
            ToolResultBlock(id="b", name="f", output="ok"),
            TextBlock(text="Here is the map of Tokyo."),
        ],
    )

    out = await XAIChatFormatter().format([msg])

    assert [m["role"] for m in out] == ["assistant", "tool", "tool", "user", "assistant"]
    assert out[1] == {
        "role": "tool",
        "tool_call_id": "a",
        "content": "Here is the map.\n<system-reminder>A(n) image file is returned and will be "
        "presented to you with the identifier [IMGID].</system-reminder>",
    }
    assert out[3] == {
        "role": "user",
        "content": [
            text_part(
                "<system-reminder>The multimodal data and their identifiers are listed as follows:"
            ),
            text_part("- IMGID (image file): "),
            image_part(f"data:image/png;base64,{B64}"),
            text_part("</system-reminder>"),
        ],
    }


async def test_unsupported_media_is_skipped_or_described() -> None:
    gif = DataBlock(source=Base64Source(data="R0lG", media_type="image/gif"))
    audio = DataBlock(source=URLSource(url="https://x/a.mp3", media_type="audio/mpeg"))
    msgs = [
        UserMsg("user", [TextBlock(text="see"), gif, audio]),
        AssistantMsg(
            "assistant",
            [
                png(),  # media in an assistant message is not sent
                ToolCallBlock(id="c", name="f", input="{}"),
                ToolResultBlock(id="c", name="f", output=[audio]),
            ],
        ),
    ]

    out = await XAIChatFormatter().format(msgs)

    assert out[0] == {"role": "user", "content": [text_part("see")]}
    assert out[1]["content"] == ""
    assert out[2]["content"] == (
        "<system-reminder>A(n) audio file is returned and can be accessed at the URL: "
        "https://x/a.mp3.</system-reminder>"
    )
    assert len(out) == 3


async def test_file_urls_are_inlined_and_remote_urls_kept(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    server: OpenAICompatibleServer = await nursery.start(partial(serve_openai_compatible))
    remote = server.add_file("p.png", b"never fetched", "image/png")
    path = tmp_path / "pic.jpg"
    path.write_bytes(b"jpeg bytes")
    msg = UserMsg(
        "user",
        [
            DataBlock(source=URLSource(url=path.as_uri(), media_type="image/jpeg")),
            DataBlock(source=URLSource(url=remote, media_type="image/png")),
        ],
    )

    (out,) = await XAIChatFormatter().format([msg])

    encoded = base64.b64encode(b"jpeg bytes").decode()
    assert out["content"] == [image_part(f"data:image/jpeg;base64,{encoded}"), image_part(remote)]
    assert server.requests == []


async def test_format_requires_a_list_of_msgs() -> None:
    with pytest.raises(TypeError, match="list of Msg"):
        await XAIChatFormatter().format("hello")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        await XAIMultiAgentFormatter().format([{"role": "user"}])  # type: ignore[list-item]


def test_default_input_types() -> None:
    assert XAIChatFormatter().input_types == ["text/plain", "image/jpeg", "image/png"]
    assert XAIMultiAgentFormatter().input_types == ["text/plain", "image/jpeg", "image/png"]


# -- multi-agent ----------------------------------------------------------------------------


async def test_multi_agent_full() -> None:
    msgs = [
        SystemMsg("system", "You're a helpful assistant."),
        UserMsg("user", [TextBlock(text="What is the capital of France?"), png()]),
        AssistantMsg("assistant", "The capital of France is Paris."),
        UserMsg("user", "What is the capital of Japan?"),
        AssistantMsg(
            "assistant",
            [
                ToolCallBlock(id="call_1", name="get_capital", input='{"country": "Japan"}'),
                ToolResultBlock(id="call_1", name="get_capital", output="Tokyo."),
                TextBlock(text="The capital of Japan is Tokyo."),
            ],
        ),
    ]

    out = await XAIMultiAgentFormatter().format(msgs)

    assert out == [
        {"role": "system", "content": "You're a helpful assistant."},
        {
            "role": "user",
            "content": [
                text_part(
                    "# Conversation History\nThe content between <history></history> tags "
                    "contains your conversation history\n<history>\n"
                    "user: What is the capital of France?\n"
                    "assistant: The capital of France is Paris.\n"
                    "user: What is the capital of Japan?\n</history>"
                ),
                image_part(f"data:image/png;base64,{B64}"),
            ],
        },
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_capital", "arguments": '{"country": "Japan"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "Tokyo."},
        {"role": "assistant", "content": "The capital of Japan is Tokyo."},
    ]


async def test_multi_agent_two_groups_space_joined_and_tags_without_prompt() -> None:
    msgs = [
        UserMsg("alice", "Hi Bob"),
        AssistantMsg("bob", [TextBlock(text="Hello"), TextBlock(text="Alice")]),
        AssistantMsg(
            "bob",
            [
                ToolCallBlock(id="c1", name="t", input="{}"),
                ToolResultBlock(id="c1", name="t", output="ok"),
            ],
        ),
        UserMsg("carol", "Me too"),
    ]

    out = await XAIMultiAgentFormatter(conversation_history_prompt="H\n").format(msgs)

    assert out[0] == {
        "role": "user",
        "content": [text_part("H\n<history>\nalice: Hi Bob\nbob: Hello Alice\n</history>")],
    }
    assert out[-1] == {
        "role": "user",
        "content": [text_part("<history>\ncarol: Me too\n</history>")],
    }


async def test_multi_agent_images_only_group_keeps_the_prompt_for_later() -> None:
    msgs = [
        UserMsg("", [png()]),
        AssistantMsg("bob", [ToolCallBlock(id="c", name="t", input="{}")]),
        UserMsg("carol", "hello"),
    ]

    out = await XAIMultiAgentFormatter().format(msgs)

    assert out[0] == {"role": "user", "content": [image_part(f"data:image/png;base64,{B64}")]}
    assert out[2]["content"][0]["text"].startswith("# Conversation History\n")
