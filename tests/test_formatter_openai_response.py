"""OpenAI Responses API formatters (trioagent/formatter/_openai_response.py).

The golden cases are AgentScope 2.0.11's outputs (``tests/golden_formatters.jsonl``); the
formatted items must be byte-for-byte equal once serialised with ``json.dumps``.
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
    IMG_URL,
    PDF,
    conv,
    golden_cases,
    hint_msgs,
    image,
    sys_msgs,
    toolimg,
    tools_msgs,
    two_groups,
)

from trioagent.formatter import (
    FormatterBase,
    OpenAIResponseFormatter,
    OpenAIResponseMultiAgentFormatter,
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


def reasoning_item() -> list[Msg]:
    raw = {"id": "rs_1", "type": "reasoning", "summary": [{"type": "summary_text", "text": "plan"}]}
    return [
        AssistantMsg(
            "assistant",
            [
                ThinkingBlock(
                    thinking="plan", extra={"reasoning_item_id": "rs_1", "reasoning_item_raw": raw}
                ),
                TextBlock(text="answer"),
                ToolCallBlock(id="call_9", name="f", input='{"q":1}'),
                ToolResultBlock(id="call_9", name="f", output="r9"),
            ],
        )
    ]


CASES: dict[str, tuple[type[FormatterBase], Any]] = {
    "openai_response.full": (
        OpenAIResponseFormatter,
        lambda: sys_msgs() + conv("url") + tools_msgs(),
    ),
    "openai_response.reasoning_item": (OpenAIResponseFormatter, reasoning_item),
    "openai_response.tool_result_url_image": (OpenAIResponseFormatter, lambda: toolimg("url")),
    "openai_response.hint": (OpenAIResponseFormatter, hint_msgs),
    "openai_response_multi.two_groups": (OpenAIResponseMultiAgentFormatter, two_groups),
}


def test_every_openai_response_golden_case_is_covered() -> None:
    names = {
        name
        for name in golden_cases()
        if name.startswith(("openai_response.", "openai_response_multi."))
    }

    assert names == set(CASES)
    assert len(names) == 5


@pytest.mark.parametrize("case", sorted(CASES))
async def test_golden(case: str) -> None:
    formatter_cls, build = CASES[case]

    out = await formatter_cls().format(build())

    assert json.dumps(out) == json.dumps(golden_cases()[case])


# -- reasoning replay ------------------------------------------------------------------------


def rs(thinking: str, item_id: str, raw: Any = None) -> ThinkingBlock:
    extra: dict[str, Any] = {"reasoning_item_id": item_id}
    if raw is not None:
        extra["reasoning_item_raw"] = raw
    return ThinkingBlock(thinking=thinking, extra=extra)


async def test_reasoning_item_rebuilt_without_a_usable_raw_item() -> None:
    msg = AssistantMsg(
        "assistant",
        [
            rs("step one", "rs_a"),
            rs("", "rs_b", raw={"id": "other", "type": "reasoning", "summary": []}),
            rs("", "rs_c", raw="not a dict"),
            ThinkingBlock(thinking="plain thinking is dropped"),
        ],
    )

    out = await OpenAIResponseFormatter().format([msg])

    assert out == [
        {
            "type": "reasoning",
            "id": "rs_a",
            "summary": [{"type": "summary_text", "text": "step one"}],
            "content": [],
        },
        {"type": "reasoning", "id": "rs_b", "summary": [], "content": []},
        {"type": "reasoning", "id": "rs_c", "summary": [], "content": []},
    ]


async def test_reasoning_item_replayed_once_per_msg_and_raw_is_copied() -> None:
    raw = {"id": "rs_1", "type": "reasoning", "summary": [{"type": "summary_text", "text": "a"}]}
    blocks = [rs("a", "rs_1", raw), rs("b", "rs_1", raw), TextBlock(text="hi")]

    out = await OpenAIResponseFormatter().format(
        [AssistantMsg("assistant", list(blocks)), AssistantMsg("assistant", list(blocks))]
    )

    assert [item.get("type", item.get("role")) for item in out] == [
        "reasoning",
        "assistant",
        "reasoning",
        "assistant",
    ]
    out[0]["summary"].clear()
    assert raw["summary"] == [{"type": "summary_text", "text": "a"}]  # a deep copy was sent


async def test_metadata_only_reasoning_goes_before_the_pending_content() -> None:
    # What a stream stores when a reasoning item had no summary text: the empty thinking
    # block comes last in the response, yet the item must precede the message and the call.
    msg = AssistantMsg(
        "assistant",
        [
            TextBlock(text="Let me check."),
            ToolCallBlock(id="call_1", name="f", input="{}"),
            rs("", "rs_9", raw={"id": "rs_9", "type": "reasoning", "summary": []}),
            ToolResultBlock(id="call_1", name="f", output="done"),
        ],
    )

    out = await OpenAIResponseFormatter().format([msg])

    assert out == [
        {"id": "rs_9", "type": "reasoning", "summary": []},
        {"role": "assistant", "content": [{"type": "output_text", "text": "Let me check."}]},
        {"type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "done"},
    ]


async def test_reasoning_with_text_follows_the_content_before_it() -> None:
    msg = AssistantMsg(
        "assistant", [TextBlock(text="before"), rs("why", "rs_2"), TextBlock(text="after")]
    )

    out = await OpenAIResponseFormatter().format([msg])

    assert [item.get("type") or item["content"][0]["text"] for item in out] == [
        "before",
        "reasoning",
        "after",
    ]


# -- media and tool results ------------------------------------------------------------------


async def test_base64_image_pdf_and_skipped_audio() -> None:
    msg = UserMsg(
        "user",
        [
            TextBlock(text="Look"),
            image("b64", "I"),
            DataBlock(name="r.pdf", source=Base64Source(data=PDF, media_type="application/pdf")),
            DataBlock(source=Base64Source(data="UklGRg==", media_type="audio/wav")),
        ],
    )

    (item,) = await OpenAIResponseFormatter().format([msg])

    assert item == {
        "role": "user",
        "content": [
            {"type": "input_text", "text": "Look"},
            {"type": "input_image", "image_url": f"data:image/png;base64,{B64}"},
            {
                "type": "input_file",
                "filename": "r.pdf",
                "file_data": f"data:application/pdf;base64,{PDF}",
            },
        ],
    }


async def test_audio_is_skipped_even_when_accepted() -> None:
    formatter = OpenAIResponseFormatter(input_types=["text/plain", "audio/*"])
    audio = DataBlock(source=Base64Source(data="UklGRg==", media_type="audio/wav"))

    out = await formatter.format([UserMsg("user", [TextBlock(text="hi"), audio])])

    assert out == [{"role": "user", "content": [{"type": "input_text", "text": "hi"}]}]


async def test_file_url_image_is_inlined(tmp_path: Path) -> None:
    path = tmp_path / "pic.png"
    path.write_bytes(b"\x89PNG fake")
    block = DataBlock(source=URLSource(url=path.as_uri(), media_type="image/png"))

    (item,) = await OpenAIResponseFormatter().format([UserMsg("user", [block])])

    expected = "data:image/png;base64," + base64.b64encode(b"\x89PNG fake").decode()
    assert item["content"] == [{"type": "input_image", "image_url": expected}]


async def test_remote_pdf_is_downloaded(nursery: trio.Nursery) -> None:
    server: OpenAICompatibleServer = await nursery.start(partial(serve_openai_compatible))
    url = server.add_file("d.pdf", b"%PDF fake", "application/pdf")
    block = DataBlock(source=URLSource(url=url, media_type="application/pdf"))

    (item,) = await OpenAIResponseFormatter().format([UserMsg("user", [block])])

    assert item["content"] == [
        {
            "type": "input_file",
            "filename": "document.pdf",
            "file_data": "data:application/pdf;base64," + base64.b64encode(b"%PDF fake").decode(),
        }
    ]
    assert [r.path for r in server.requests] == ["/files/d.pdf"]


async def test_tool_result_with_pdf_and_unsupported_media_keeps_order() -> None:
    video = DataBlock(source=URLSource(url="https://x/v.mp4", media_type="video/mp4"))
    pdf = DataBlock(source=Base64Source(data=PDF, media_type="application/pdf"))
    msg = AssistantMsg(
        "assistant",
        [
            ToolCallBlock(id="c", name="fetch", input="{}"),
            ToolResultBlock(id="c", name="fetch", output=[video, TextBlock(text="and"), pdf]),
        ],
    )

    _, output = await OpenAIResponseFormatter().format([msg])

    assert output["output"] == [
        {
            "type": "input_text",
            "text": "<system-reminder>A(n) video file is returned and can be accessed at the "
            "URL: https://x/v.mp4.</system-reminder>",
        },
        {"type": "input_text", "text": "and"},
        {
            "type": "input_file",
            "filename": "document.pdf",
            "file_data": f"data:application/pdf;base64,{PDF}",
        },
    ]


async def test_tool_result_with_only_unsupported_media_is_text() -> None:
    formatter = OpenAIResponseFormatter(input_types=["text/plain"])  # images not accepted
    msg = AssistantMsg(
        "assistant",
        [
            ToolCallBlock(id="c", name="f", input="{}"),
            ToolResultBlock(id="c", name="f", output=[TextBlock(text="map:"), image("url", "M")]),
        ],
    )

    _, output = await formatter.format([msg])

    assert output["output"] == (
        "map:\n<system-reminder>A(n) image file is returned and can be accessed at the URL: "
        f"{IMG_URL}.</system-reminder>"
    )


async def test_parallel_calls_then_results_and_multimodal_hint() -> None:
    msg = AssistantMsg(
        "assistant",
        [
            TextBlock(text="two lookups"),
            ToolCallBlock(id="a", name="f", input='{"x": 1}'),
            ToolCallBlock(id="b", name="f", input='{"x": 2}'),
            ToolResultBlock(id="a", name="f", output="ra"),
            ToolResultBlock(id="b", name="f", output="rb"),
            HintBlock(hint=[TextBlock(text="See:"), image("b64", "H")]),
            HintBlock(hint=[]),
        ],
    )

    out = await OpenAIResponseFormatter().format([msg])

    assert [item.get("type") or item["role"] for item in out] == [
        "assistant",
        "function_call",
        "function_call",
        "function_call_output",
        "function_call_output",
        "user",
    ]
    assert [out[3]["call_id"], out[4]["call_id"]] == ["a", "b"]
    assert out[5]["content"] == [
        {"type": "input_text", "text": "See:"},
        {"type": "input_image", "image_url": f"data:image/png;base64,{B64}"},
    ]


async def test_empty_messages_produce_nothing() -> None:
    out = await OpenAIResponseFormatter().format(
        [AssistantMsg("a", []), AssistantMsg("a", [ThinkingBlock(thinking="only")])]
    )

    assert out == []


async def test_format_requires_a_list_of_msgs() -> None:
    with pytest.raises(TypeError, match="list of Msg"):
        await OpenAIResponseFormatter().format("hello")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        await OpenAIResponseMultiAgentFormatter().format([{"role": "user"}])  # type: ignore[list-item]


def test_input_types() -> None:
    formatter = OpenAIResponseFormatter()

    assert formatter.supported_input_media_types == ["image/*", "application/pdf"]
    assert not formatter.is_supported("audio/wav")
    assert OpenAIResponseMultiAgentFormatter().input_types == formatter.input_types


# -- multi-agent ---------------------------------------------------------------------------


async def test_multi_agent_system_media_and_prompt_only_once() -> None:
    formatter = OpenAIResponseMultiAgentFormatter(conversation_history_prompt="HISTORY:\n")
    msgs = [
        SystemMsg("system", [TextBlock(text="A"), TextBlock(text="B")]),
        AssistantMsg("a", [ThinkingBlock(thinking="ignored")]),
        UserMsg("u", [TextBlock(text="look"), image("url", "X")]),
        AssistantMsg("a", [ToolCallBlock(id="c", name="t", input="{}")]),
        UserMsg("u", [image("b64", "Y")]),
    ]

    out = await formatter.format(msgs)

    assert out == [
        {"role": "system", "content": "A\nB"},
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "HISTORY:\n<history>\nu: look\n</history>"},
                {"type": "input_image", "image_url": IMG_URL},
            ],
        },
        {"type": "function_call", "call_id": "c", "name": "t", "arguments": "{}"},
        {
            "role": "user",
            "content": [{"type": "input_image", "image_url": f"data:image/png;base64,{B64}"}],
        },
    ]
