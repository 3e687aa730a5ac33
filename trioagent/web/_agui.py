"""The AG-UI mapping: a reply's events as AG-UI protocol events (the ``ag-ui-protocol`` types).

One :class:`AGUIRun` per HTTP run.  It opens the run (``RUN_STARTED``), translates each agent
event as it arrives, and closes the run with exactly one ``RUN_FINISHED`` or ``RUN_ERROR``:

* a completed reply ends ``RUN_FINISHED`` (outcome ``success``);
* an interrupted one (Stop, a closed connection, a server shutdown) ``RUN_FINISHED`` with
  outcome ``cancelled`` -- the partial answer is kept in the thread;
* a reply parked for confirmations or external results ``RUN_FINISHED`` with outcome
  ``interrupt``, one AG-UI interrupt per waiting tool call (its ``id`` is the call's id), which
  the next run answers with ``resume`` entries;
* an error, or too many iterations, ``RUN_ERROR``.

Thinking blocks are sent as ``REASONING_*`` events: AG-UI 1.0 removed the older ``THINKING_*``
names.  A trioagent ``CustomEvent`` named ``state_snapshot`` (value: the state) or
``state_delta`` (value: ``{"delta": [JSON Patch operations]}``) becomes ``STATE_SNAPSHOT`` /
``STATE_DELTA``; events AG-UI has no type for travel as ``CUSTOM`` events named after the
trioagent event (``require_user_confirm``, ``tool_result_text_delta``, ...).

An event relayed from another agent -- a pipeline's participant, an agent called as a tool --
carries its agent path (:func:`trioagent.event.agent_path`): its AG-UI events get
``metadata.agentPath`` (the path, outermost first), and a text message the ``name`` of the
path joined with ``/``.  Such an agent's own start and end travel as ``CUSTOM`` events
(``reply_start``, ``reply_end``): they do not close the run.  A pipeline's run closes with the
pipeline's final Msg (:meth:`AGUIRun.end_of`).
"""

from __future__ import annotations

import time
from typing import Any

from ag_ui.core import (
    BaseEvent,
    CustomEvent as AGUICustomEvent,
    Interrupt,
    ReasoningEndEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    StepFinishedEvent,
    StepStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent as AGUIToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent as AGUIToolCallStartEvent,
)

from ..event import (
    AgentEvent,
    CustomEvent,
    ModelCallEndEvent,
    ModelCallStartEvent,
    ReplyEndEvent,
    ReplyStartEvent,
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
    ToolResultTextDeltaEvent,
    agent_path,
)
from ..message import Msg, ToolCallBlock, ToolCallState
from ..serialization import unstructure
from ..types import ReplyFinishedReason

__all__ = ["CONFIRM_REASON", "EXTERNAL_REASON", "AGUIRun", "encode_sse", "interrupt_of"]

#: The ``reason`` of an AG-UI interrupt asking the user to approve or deny a tool call.
CONFIRM_REASON = "tool_confirmation"
#: The ``reason`` of an AG-UI interrupt asking the client to run a tool call and send its result.
EXTERNAL_REASON = "external_execution"


def encode_sse(event: BaseEvent) -> bytes:
    """One AG-UI event as an SSE ``data:`` frame (camelCase keys, absent fields left out)."""
    return b"data: " + event.model_dump_json(by_alias=True).encode() + b"\n\n"


def _now_ms() -> int:
    return int(time.time() * 1000)


class AGUIRun:
    """Translates the events of one run; see the module docstring for the mapping."""

    def __init__(self, thread_id: str, run_id: str) -> None:
        self.thread_id = thread_id
        self.run_id = run_id
        self.finished = False
        self._model_name = "model_call"
        self._results: dict[str, list[str]] = {}

    def start(self) -> BaseEvent:
        return RunStartedEvent(thread_id=self.thread_id, run_id=self.run_id, timestamp=_now_ms())

    def translate(self, event: AgentEvent) -> list[BaseEvent]:
        """The AG-UI events for one agent event (none for a few, two for thinking edges)."""
        path = agent_path(event)
        if not path:
            return self._translate(event)
        # A participant's own start or end does not open or close the run.
        own = isinstance(event, ReplyStartEvent | ReplyEndEvent)
        tagged = {"metadata": {"agentPath": list(path)}}
        return [
            out.model_copy(
                update={**tagged, "name": "/".join(path)}
                if isinstance(out, TextMessageStartEvent)
                else tagged
            )
            for out in ([self._custom(event)] if own else self._translate(event))
        ]

    def _translate(self, event: AgentEvent) -> list[BaseEvent]:
        match event:
            case ReplyStartEvent():
                return []  # the run was opened by start(); a resumed reply has no start
            case ReplyEndEvent():
                return [self.end(event)]
            case ModelCallStartEvent():
                self._model_name = event.model_name
                return [StepStartedEvent(step_name=event.model_name)]
            case ModelCallEndEvent():
                return [StepFinishedEvent(step_name=self._model_name)]
            case TextBlockStartEvent():
                return [TextMessageStartEvent(message_id=event.block_id, role="assistant")]
            case TextBlockDeltaEvent():
                return [TextMessageContentEvent(message_id=event.block_id, delta=event.delta)]
            case TextBlockEndEvent():
                return [TextMessageEndEvent(message_id=event.block_id)]
            case ThinkingBlockStartEvent():
                return [
                    ReasoningStartEvent(message_id=event.block_id),
                    ReasoningMessageStartEvent(message_id=event.block_id, role="reasoning"),
                ]
            case ThinkingBlockDeltaEvent():
                return [ReasoningMessageContentEvent(message_id=event.block_id, delta=event.delta)]
            case ThinkingBlockEndEvent():
                return [
                    ReasoningMessageEndEvent(message_id=event.block_id),
                    ReasoningEndEvent(message_id=event.block_id),
                ]
            case ToolCallStartEvent():
                return [
                    AGUIToolCallStartEvent(
                        tool_call_id=event.tool_call_id,
                        tool_call_name=event.tool_call_name,
                        parent_message_id=event.reply_id,
                    )
                ]
            case ToolCallDeltaEvent():
                return [ToolCallArgsEvent(tool_call_id=event.tool_call_id, delta=event.delta)]
            case ToolCallEndEvent():
                return [AGUIToolCallEndEvent(tool_call_id=event.tool_call_id)]
            case ToolResultTextDeltaEvent():
                self._results.setdefault(event.tool_call_id, []).append(event.delta)
                return [self._custom(event)]
            case ToolResultEndEvent():
                content = "".join(self._results.pop(event.tool_call_id, []))
                return [
                    ToolCallResultEvent(
                        tool_call_id=event.tool_call_id,
                        # One tool message per result: the reply id alone is shared by all.
                        message_id=f"{event.reply_id}:{event.tool_call_id}",
                        content=content or str(event.state),
                        role="tool",
                    )
                ]
            case CustomEvent(name="state_snapshot"):
                return [StateSnapshotEvent(snapshot=event.value)]
            case CustomEvent(name="state_delta") if isinstance(event.value.get("delta"), list):
                return [StateDeltaEvent(delta=event.value["delta"])]
            case _:
                return [self._custom(event)]

    def end(self, event: ReplyEndEvent) -> BaseEvent:
        """The run's closing event for the reply's end."""
        error = event.error
        if error is None:
            return self._end(event.reply_id, event.finished_reason, "the reply failed", "error")
        return self._end(event.reply_id, event.finished_reason, error.message, str(error.type))

    def end_of(self, msg: Msg) -> BaseEvent:
        """The run's closing event for a pipeline's final Msg (it has a ``finished_reason``)."""
        assert msg.finished_reason is not None
        return self._end(msg.id, msg.finished_reason, msg.get_text_content() or "", "error")

    def _end(
        self, reply_id: str, reason: ReplyFinishedReason, message: str, code: str
    ) -> BaseEvent:
        self.finished = True
        result = {"replyId": reply_id, "finishedReason": str(reason)}
        match reason:
            case ReplyFinishedReason.COMPLETED:
                return self._finished(result, RunFinishedSuccessOutcome())
            case ReplyFinishedReason.INTERRUPTED:
                return self._finished(result, RunFinishedCancelledOutcome())
            case ReplyFinishedReason.EXCEED_MAX_ITERS:
                return RunErrorEvent(
                    message="The agent exceeded its maximum reasoning-acting iterations",
                    code="exceed_max_iters",
                    timestamp=_now_ms(),
                )
        return RunErrorEvent(message=message, code=code, timestamp=_now_ms())

    def parked(self, calls: list[ToolCallBlock]) -> BaseEvent:
        """The closing event of a run whose reply parked: the calls waiting for an answer."""
        self.finished = True
        interrupts = [interrupt_of(call) for call in calls]
        return self._finished(
            {"finishedReason": "parked"}, RunFinishedInterruptOutcome(interrupts=interrupts)
        )

    def error(self, message: str, code: str) -> BaseEvent:
        """A ``RUN_ERROR`` for a failure outside the reply (no end event was produced)."""
        self.finished = True
        return RunErrorEvent(message=message, code=code, timestamp=_now_ms())

    def _finished(self, result: dict[str, Any], outcome: Any) -> BaseEvent:
        return RunFinishedEvent(
            thread_id=self.thread_id,
            run_id=self.run_id,
            result=result,
            outcome=outcome,
            timestamp=_now_ms(),
        )

    @staticmethod
    def _custom(event: AgentEvent) -> BaseEvent:
        return AGUICustomEvent(name=str(event.type).lower(), value=unstructure(event))


def interrupt_of(call: ToolCallBlock) -> Interrupt:
    """The AG-UI interrupt asking about one waiting tool call (its id is the call's id): a
    confirmation for a call in state ``asking``, else an external execution."""
    reason = CONFIRM_REASON if call.state == ToolCallState.ASKING else EXTERNAL_REASON
    verb = "approve" if reason == CONFIRM_REASON else "run"
    return Interrupt(
        id=call.id,
        reason=reason,
        tool_call_id=call.id,
        message=f"{verb} {call.name}({call.input})",
        metadata={"toolName": call.name, "arguments": call.input},
    )
