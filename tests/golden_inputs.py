"""The inputs of the golden formatter cases and the golden-file loader (not a test module).

The golden cases (``tests/golden_formatters.jsonl``) are AgentScope 2.0.11's formatted outputs
for these inputs; the
formatter test modules import the builders as ``golden_inputs``.  Every builder returns new
messages on each call.  A provider-specific variant stays in its test module.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

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

GOLDEN = Path(__file__).with_name("golden_formatters.jsonl")

B64 = "ZmFrZSBpbWFnZSBkYXRh"
PDF = "JVBERi0xLjQgZmFrZQ=="
IMG_URL = "https://example.com/image.png"


def golden_cases() -> dict[str, list[dict[str, Any]]]:
    """Case name -> AgentScope's formatted output."""
    cases = {}
    for line in GOLDEN.read_text("utf-8").splitlines():
        case = json.loads(line)
        cases[case["case"]] = case["out"]
    return cases


# -- blocks ----------------------------------------------------------------------------------


def image(src: str, block_id: str) -> DataBlock:
    """The PNG at ``IMG_URL`` (``src="url"``) or inline as ``B64`` (any other ``src``)."""
    source: URLSource | Base64Source
    if src == "url":
        source = URLSource(url=IMG_URL, media_type="image/png")
    else:
        source = Base64Source(data=B64, media_type="image/png")
    return DataBlock(id=block_id, source=source)


def b64_image(block_id: str = "I") -> DataBlock:
    """The inline PNG (``image("b64", block_id)``)."""
    return image("b64", block_id)


# -- messages --------------------------------------------------------------------------------


def sys_msgs() -> list[Msg]:
    return [SystemMsg("system", "You're a helpful assistant.")]


def conv(img: str | None = None) -> list[Msg]:
    """Three questions, two answers; with ``img`` the first question carries ``image(img)``."""
    first: list[TextBlock | DataBlock] = [TextBlock(text="What is the capital of France?")]
    if img is not None:
        first.append(image(img, "IMG0"))
    return [
        UserMsg("user", first),
        AssistantMsg("assistant", "The capital of France is Paris."),
        UserMsg("user", "What is the capital of Germany?"),
        AssistantMsg("assistant", "The capital of Germany is Berlin."),
        UserMsg("user", "What is the capital of Japan?"),
    ]


def tools_msgs() -> list[Msg]:
    return [
        AssistantMsg(
            "assistant",
            [
                ToolCallBlock(id="call_1", name="get_capital", input='{"country": "Japan"}'),
                ToolResultBlock(
                    id="call_1",
                    name="get_capital",
                    output=[TextBlock(text="The capital of Japan is Tokyo.")],
                ),
                TextBlock(text="The capital of Japan is Tokyo."),
            ],
        )
    ]


def complex_msgs() -> list[Msg]:
    """One assistant turn: three rounds of thinking, text, tool calls and their results."""

    def call(n: int) -> ToolCallBlock:
        return ToolCallBlock(id=f"call_{n}", name=f"func_{n}", input=f'{{"arg": "value{n}"}}')

    def result(n: int) -> ToolResultBlock:
        return ToolResultBlock(
            id=f"call_{n}", name=f"func_{n}", output=[TextBlock(text=f"result_{n}")]
        )

    return [
        AssistantMsg(
            "assistant",
            [
                ThinkingBlock(thinking="thinking_1"),
                TextBlock(text="text_1"),
                call(1),
                call(2),
                result(1),
                result(2),
                ThinkingBlock(thinking="thinking_2"),
                TextBlock(text="text_2"),
                call(3),
                result(3),
                call(4),
                result(4),
                ThinkingBlock(thinking="thinking_3"),
                TextBlock(text="text_3"),
            ],
        )
    ]


def thinking_msgs() -> list[Msg]:
    """An assistant reply with a thinking block before its text."""
    return [
        AssistantMsg(
            "assistant", [ThinkingBlock(thinking="inner thoughts"), TextBlock(text="reply")]
        )
    ]


def truncated_tool_msgs() -> list[Msg]:
    """A tool call whose JSON input was cut off mid-string."""
    return [AssistantMsg("assistant", [ToolCallBlock(id="c", name="f", input='{"city": "Tok')])]


def hint_msgs() -> list[Msg]:
    return [
        AssistantMsg(
            "assistant",
            [
                TextBlock(text="Let me think about that."),
                HintBlock(hint="Remember to be concise."),
                TextBlock(text="Here is my answer."),
            ],
        )
    ]


def hint_mm_msgs() -> list[Msg]:
    return [
        AssistantMsg(
            "assistant",
            [HintBlock(hint=[TextBlock(text="Inspect this screenshot:"), image("b64", "H1")])],
        )
    ]


def toolimg(src: str) -> list[Msg]:
    """A tool call whose result holds text and ``image(src)``."""
    return [
        AssistantMsg(
            "assistant",
            [
                ToolCallBlock(id="call_img", name="get_map", input='{"city": "Tokyo"}'),
                ToolResultBlock(
                    id="call_img",
                    name="get_map",
                    output=[TextBlock(text="Here is the map."), image(src, "IMGID")],
                ),
                TextBlock(text="Here is the map of Tokyo."),
            ],
        )
    ]


def pdf_msgs() -> list[Msg]:
    return [
        UserMsg(
            "user",
            [
                TextBlock(text="Summarize this."),
                DataBlock(
                    name="report.pdf", source=Base64Source(data=PDF, media_type="application/pdf")
                ),
            ],
        )
    ]


def two_groups() -> list[Msg]:
    """Two agent-message groups around a tool sequence (multi-agent formatters)."""
    return [
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
