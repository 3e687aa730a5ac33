"""The AG-UI mapping (trioagent.web._agui and the thread snapshot): every agent event becomes
valid AG-UI 1.0 events, and every end reason its own closing event."""

from __future__ import annotations

from typing import Any

import orjson
import pydantic
import pytest
from ag_ui.core import BaseEvent, Event

from trioagent.agent import AgentState
from trioagent.event import (
    CustomEvent,
    DataBlockStartEvent,
    ExceedMaxItersEvent,
    ModelCallEndEvent,
    ModelCallStartEvent,
    ReplyEndEvent,
    ReplyStartEvent,
    RequireUserConfirmEvent,
    TextBlockDeltaEvent,
    TextBlockEndEvent,
    TextBlockStartEvent,
    ThinkingBlockDeltaEvent,
    ThinkingBlockEndEvent,
    ThinkingBlockStartEvent,
    ToolCallDeltaEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
    ToolResultEndEvent,
    ToolResultStartEvent,
    ToolResultTextDeltaEvent,
    tag_agent,
)
from trioagent.message import (
    AssistantMsg,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    UserMsg,
)
from trioagent.types import ErrorInfo, ReplyFinishedReason
from trioagent.web import AGUIRun
from trioagent.web._agui import encode_sse
from trioagent.web._history import thread_snapshot

EVENT = pydantic.TypeAdapter(Event)
R = "reply-1"


def _wire(events: list[BaseEvent]) -> list[dict[str, Any]]:
    """The events as a client reads them, each checked against the AG-UI schema."""
    out = []
    for event in events:
        frame = encode_sse(event)
        assert frame.startswith(b"data: ")
        assert frame.endswith(b"\n\n")
        data = orjson.loads(frame[6:])
        EVENT.validate_python(data)
        out.append(data)
    return out


def _translate(*events: Any) -> list[dict[str, Any]]:
    run = AGUIRun("thread-1", "run-1")
    return _wire([run.start()] + [e for ev in events for e in run.translate(ev)])


def test_a_streamed_round_maps_to_agui_events() -> None:
    wire = _translate(
        ReplyStartEvent(session_id="thread-1", reply_id=R, name="assistant"),
        ModelCallStartEvent(reply_id=R, model_name="gpt"),
        ThinkingBlockStartEvent(reply_id=R, block_id="k"),
        ThinkingBlockDeltaEvent(reply_id=R, block_id="k", delta="hmm"),
        ThinkingBlockEndEvent(reply_id=R, block_id="k"),
        TextBlockStartEvent(reply_id=R, block_id="b"),
        TextBlockDeltaEvent(reply_id=R, block_id="b", delta="Hi"),
        TextBlockEndEvent(reply_id=R, block_id="b"),
        ToolCallStartEvent(reply_id=R, tool_call_id="c", tool_call_name="f"),
        ToolCallDeltaEvent(reply_id=R, tool_call_id="c", delta='{"a": 1}'),
        ToolCallEndEvent(reply_id=R, tool_call_id="c"),
        ModelCallEndEvent(reply_id=R),
        ToolResultStartEvent(reply_id=R, tool_call_id="c", tool_call_name="f"),
        ToolResultTextDeltaEvent(reply_id=R, tool_call_id="c", delta="4"),
        ToolResultTextDeltaEvent(reply_id=R, tool_call_id="c", delta="2"),
        ToolResultEndEvent(reply_id=R, tool_call_id="c", state="success"),
        ReplyEndEvent(session_id="thread-1", reply_id=R),
    )
    assert [e["type"] for e in wire] == [
        "RUN_STARTED",
        "STEP_STARTED",
        "REASONING_START",
        "REASONING_MESSAGE_START",
        "REASONING_MESSAGE_CONTENT",
        "REASONING_MESSAGE_END",
        "REASONING_END",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "STEP_FINISHED",
        "CUSTOM",
        "CUSTOM",
        "CUSTOM",
        "TOOL_CALL_RESULT",
        "RUN_FINISHED",
    ]
    assert wire[0] == {
        "type": "RUN_STARTED",
        "threadId": "thread-1",
        "runId": "run-1",
        "timestamp": wire[0]["timestamp"],
    }
    assert wire[1]["stepName"] == wire[13]["stepName"] == "gpt"
    assert wire[4]["delta"] == "hmm"
    assert wire[10]["parentMessageId"] == R
    assert wire[14]["name"] == "tool_result_start"
    result = wire[17]
    assert result["content"] == "42"
    assert result["messageId"] == f"{R}:c"
    assert wire[-1]["outcome"] == {"type": "success"}
    assert wire[-1]["result"] == {"replyId": R, "finishedReason": "completed"}


@pytest.mark.parametrize(
    ("end", "expected"),
    [
        (ReplyEndEvent(session_id="s", reply_id=R, finished_reason="interrupted"), "cancelled"),
        (ReplyEndEvent(session_id="s", reply_id=R, finished_reason="exceed_max_iters"), None),
        (
            ReplyEndEvent(
                session_id="s",
                reply_id=R,
                finished_reason="error",
                error=ErrorInfo(type="rate_limit", message="slow down"),
            ),
            None,
        ),
    ],
)
def test_each_end_reason_closes_the_run(end: ReplyEndEvent, expected: str | None) -> None:
    run = AGUIRun("s", "run-1")
    (closing,) = _wire(run.translate(end))
    assert run.finished
    if expected is not None:
        assert closing["type"] == "RUN_FINISHED"
        assert closing["outcome"] == {"type": expected}
    elif end.finished_reason == "exceed_max_iters":
        assert closing["type"] == "RUN_ERROR"
        assert closing["code"] == "exceed_max_iters"
    else:
        assert closing == {
            "type": "RUN_ERROR",
            "message": "slow down",
            "code": "rate_limit",
            "timestamp": closing["timestamp"],
        }


def test_a_parked_run_ends_with_one_interrupt_per_waiting_call() -> None:
    calls = [
        ToolCallBlock(id="c1", name="rm", input='{"path": "/"}', state="asking"),
        ToolCallBlock(id="c2", name="remote", input="{}", state="submitted"),
    ]
    run = AGUIRun("s", "run-1")
    custom, closing = _wire(
        [
            *run.translate(RequireUserConfirmEvent(reply_id=R, tool_calls=calls[:1])),
            run.parked(calls),
        ]
    )
    assert custom["name"] == "require_user_confirm"
    assert custom["value"]["tool_calls"][0]["id"] == "c1"
    interrupts = closing["outcome"]["interrupts"]
    assert [(i["id"], i["reason"], i["toolCallId"]) for i in interrupts] == [
        ("c1", "tool_confirmation", "c1"),
        ("c2", "external_execution", "c2"),
    ]
    assert interrupts[0]["metadata"] == {"toolName": "rm", "arguments": '{"path": "/"}'}


def test_state_events_and_the_rest_travel_as_custom_events() -> None:
    wire = _translate(
        CustomEvent(reply_id=R, name="state_snapshot", value={"step": 1}),
        CustomEvent(
            reply_id=R,
            name="state_delta",
            value={"delta": [{"op": "replace", "path": "/step", "value": 2}]},
        ),
        CustomEvent(reply_id=R, name="state_delta", value={"delta": "not a patch"}),
        ExceedMaxItersEvent(reply_id=R, name="assistant"),
        DataBlockStartEvent(reply_id=R, block_id="d", media_type="image/png"),
    )[1:]
    assert [(e["type"], e.get("name")) for e in wire] == [
        ("STATE_SNAPSHOT", None),
        ("STATE_DELTA", None),
        ("CUSTOM", "custom"),
        ("CUSTOM", "exceed_max_iters"),
        ("CUSTOM", "data_block_start"),
    ]
    assert wire[0]["snapshot"] == {"step": 1}
    assert wire[1]["delta"][0]["value"] == 2
    assert wire[2]["value"]["value"] == {"delta": "not a patch"}


def test_the_thread_snapshot_keeps_rounds_in_order_and_marks_ends() -> None:
    state = AgentState()
    state.context.append(UserMsg("user", "what time?"))
    answer = AssistantMsg(
        "assistant",
        [
            ThinkingBlock(thinking="the clock"),
            TextBlock(text="Looking."),
            ToolCallBlock(id="c1", name="now", input="{}", state="finished"),
            ToolResultBlock(id="c1", name="now", output="noon", state="success"),
            TextBlock(text="It is noon."),
        ],
    )
    answer.metadata["finished_reason"] = "interrupted"
    state.context.append(answer)
    state.context.append(
        AssistantMsg("assistant", [ToolCallBlock(id="c2", name="rm", state="asking")])
    )
    snapshot = thread_snapshot(state, running=False)
    messages = snapshot["messages"]
    assert [m["role"] for m in messages] == [
        "user",
        "reasoning",
        "assistant",
        "tool",
        "assistant",
        "assistant",
    ]
    assert messages[2]["content"] == "Looking."
    assert messages[2]["toolCalls"][0]["function"] == {"name": "now", "arguments": "{}"}
    assert "metadata" not in messages[2]
    assert messages[3] == {
        "id": f"{answer.id}:c1",
        "role": "tool",
        "content": "noon",
        "toolCallId": "c1",
        "metadata": {"state": "success"},
    }
    assert messages[4]["content"] == "It is noon."
    assert messages[4]["metadata"] == {"finishedReason": "interrupted"}
    assert [i["id"] for i in snapshot["interrupts"]] == ["c2"]
    assert snapshot["running"] is False


def test_an_inner_agents_events_carry_its_path_and_its_end_does_not_close_the_run() -> None:
    # An agent called as a tool (or a pipeline's participant) relays tagged events.
    inner = "reply-inner"
    run = AGUIRun("thread-1", "run-1")
    events = [
        tag_agent(TextBlockStartEvent(reply_id=inner, block_id="b"), "clerk"),
        tag_agent(TextBlockDeltaEvent(reply_id=inner, block_id="b", delta="memo"), "clerk"),
        tag_agent(ReplyEndEvent(session_id="thread-1", reply_id=inner), "clerk"),
    ]
    wire = _wire([run.start()] + [e for ev in events for e in run.translate(ev)])
    assert not run.finished  # the outer reply goes on
    assert [(e["type"], e["metadata"]) for e in wire[1:]] == [
        ("TEXT_MESSAGE_START", {"agentPath": ["clerk"]}),
        ("TEXT_MESSAGE_CONTENT", {"agentPath": ["clerk"]}),
        ("CUSTOM", {"agentPath": ["clerk"]}),
    ]
    assert wire[1]["name"] == "clerk"
    assert wire[3]["name"] == "reply_end"
    # A pipeline's run closes with its final Msg.
    msg = AssistantMsg("lead", "done", finished_reason=ReplyFinishedReason.INTERRUPTED)
    (end,) = _wire([run.end_of(msg)])
    assert end["type"] == "RUN_FINISHED"
    assert end["outcome"] == {"type": "cancelled"}
    assert end["result"] == {"replyId": msg.id, "finishedReason": "interrupted"}
