"""``GoalPipeline``: an executor works on a goal, a verifier judges the work, until it passes.

The executor ends each attempt with a structured execution report; the verifier answers with
a structured verdict (``pass``, ``fail`` or ``impossible`` and a message).  A failed verdict
goes back to the executor as feedback, up to ``max_iters`` judged attempts.  The loop's
progress (attempts, retries, the goal, the last report) lives in the executor's state, so it
survives a HITL park, a save and a restore in another process.
"""

from __future__ import annotations

import logging
from typing import Any

import attrs

from ..agent import Agent, ReplyInputs
from ..event import ExternalExecutionResultEvent, UserConfirmResultEvent, UserInterruptEvent
from ..exception import StructuredOutputError
from ..message import DataBlock, Msg, TextBlock, UserMsg
from ..serialization import structure, unstructure
from ..types import ReplyFinishedReason
from ._base import Emit, PipelineBase, parked_on, participant_sink

__all__ = ["EXECUTION_REPORT_SCHEMA", "VERIFICATION_SCHEMA", "GoalPipeline", "GoalProgress"]

logger = logging.getLogger("trioagent.pipeline")

#: Where the loop's progress is kept in the executor's ``state.middle_context``.
PROGRESS_KEY = "trioagent.pipeline.goal"

EXECUTION_REPORT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "report": {
            "type": "string",
            "description": (
                "What you achieved and how to check it: the files you made, how to run or "
                "use the result, the environment it needs."
            ),
        }
    },
    "required": ["report"],
}

VERIFICATION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "result": {
            "type": "string",
            "enum": ["pass", "fail", "impossible"],
            "description": (
                "pass: the goal is met; fail: it is not met yet; impossible: it cannot be met, "
                "the executor should give up."
            ),
        },
        "message": {
            "type": "string",
            "description": (
                "Unless it passed: what is wrong and where (files, lines), precise enough to fix."
            ),
        },
    },
    "required": ["result", "message"],
}

REPORT_HINT = (
    "<system-reminder>Once the goal is done, sum up what you produced (files, how to run or "
    "use it, what it needs) so a reviewer can check it.</system-reminder>"
)
REPORT_RETRY = (
    "<system-reminder>No valid execution report was produced.  Call the structured-output "
    "tool with a report that matches its schema.</system-reminder>"
)
VERIFY_OPEN = "<system-reminder>Check whether the executor met the goal below.\n<goal>"
VERIFY_CLOSE = "</goal>\nThe executor reports:\n<report>{report}</report></system-reminder>"
VERDICT_RETRY_OPEN = (
    "<system-reminder>No valid verdict was produced.  Call the structured-output tool with a "
    "verdict that matches its schema.  The goal to check:\n<goal>"
)
VERDICT_RETRY_CLOSE = "</goal></system-reminder>"
FEEDBACK = (
    "<system-reminder>The reviewer did not accept the work.  Fix it using this feedback:\n"
    "{feedback}</system-reminder>"
)


@attrs.define(kw_only=True)
class GoalProgress:
    """How far the loop got: judged attempts, structured-output retries, the goal, the last
    report (kept across HITL resumes; reset by a new goal)."""

    iters: int = 0
    executor_retries: int = 0
    verifier_retries: int = 0
    goal: list[TextBlock | DataBlock] = attrs.field(factory=list)
    report: str | None = None


class GoalPipeline(PipelineBase):
    """Run ``executor`` and ``verifier`` in a loop until the goal is reached.

    Args:
        executor: does the work; each attempt ends with an execution report.
        verifier: judges each report against the goal.
        verifier_reset_context: clear the verifier's context (and summary) after a failed
            verdict, so each judgement starts fresh.
        max_iters: the most attempts judged before the loop gives up.
        max_retries: how many times each of them may fail to produce its structured output
            (over the whole goal, HITL resumes included) before
            :class:`~trioagent.exception.StructuredOutputError` is raised.

    ``reply(goal)`` returns the verifier's last verdict Msg (its ``structured_output`` holds
    ``result`` and ``message``; :attr:`progress` ``.report`` the executor's last report), or
    the parked participant's Msg when one parks on a confirmation or an external execution;
    the result event sent back is routed by ``reply_id``, and the loop goes on where it
    stopped.

    As in AgentScope 2.0.11, with one difference on purpose: an attempt that ends
    interrupted (a tool cut short without a cancellation) ends the loop with that Msg
    instead of counting as a missing report.
    """

    def __init__(
        self,
        executor: Agent,
        verifier: Agent,
        verifier_reset_context: bool = True,
        max_iters: int = 10,
        max_retries: int = 3,
    ) -> None:
        super().__init__()
        if executor is verifier or executor.name == verifier.name:
            raise ValueError("the executor and the verifier must be two agents with two names")
        if max_iters < 1 or max_retries < 0:
            raise ValueError("max_iters must be >= 1 and max_retries >= 0")
        self.executor = executor
        self.verifier = verifier
        self.verifier_reset_context = verifier_reset_context
        self.max_iters = max_iters
        self.max_retries = max_retries

    @property
    def participants(self) -> list[Agent]:
        return [self.executor, self.verifier]

    @property
    def progress(self) -> GoalProgress:
        """The loop's progress, read from the executor's state."""
        data = self.executor.state.middle_context.get(PROGRESS_KEY)
        return structure(data, GoalProgress) if data is not None else GoalProgress()

    def _save(self, progress: GoalProgress) -> None:
        self.executor.state.middle_context[PROGRESS_KEY] = unstructure(progress)

    # -- the loop -------------------------------------------------------------------------------

    async def _drive(self, inputs: ReplyInputs, emit: Emit) -> Msg:
        executor_in: ReplyInputs = None
        verifier_in: ReplyInputs = None
        if isinstance(
            inputs, UserConfirmResultEvent | ExternalExecutionResultEvent | UserInterruptEvent
        ):
            if isinstance(inputs, UserInterruptEvent):
                if inputs.reply_id:
                    self._parked_on(inputs.reply_id)  # a reply id, if given, must be parked
                aborted = await self._abort(emit)
                if aborted is None:
                    raise ValueError("no participant of the goal loop is parked")
                return aborted
            parked = self._parked_on(inputs.reply_id)
            if parked is self.executor:
                executor_in = inputs
            else:
                verifier_in = inputs
        else:
            executor_in = self._start(inputs)
        while True:
            if executor_in is not None:
                executed = await self._execute(executor_in, emit)
                if executed is not None:
                    return executed  # parked, or ended without a report
            verdict = await self._verify(verifier_in, emit)
            verifier_in = None
            if verdict.finished_reason != ReplyFinishedReason.COMPLETED:
                return verdict  # parked, or ended interrupted
            output = verdict.structured_output or {}
            if output.get("result") in ("pass", "impossible"):
                if output.get("result") == "impossible":
                    logger.info("the verifier judged the goal impossible: %s", output["message"])
                return verdict
            progress = self.progress
            progress.iters += 1
            self._save(progress)
            if self.verifier_reset_context:
                self.verifier.state.context.clear()
                self.verifier.state.summary = ""
            if progress.iters >= self.max_iters:
                return verdict
            executor_in = UserMsg("user", FEEDBACK.format(feedback=output.get("message", "")))

    def _start(self, inputs: ReplyInputs) -> list[Msg]:
        """A new goal: the progress starts over; the executor gets the goal and a reminder
        to report."""
        if isinstance(inputs, Msg):
            msgs = [inputs]
        elif (
            isinstance(inputs, list | tuple) and inputs and all(isinstance(m, Msg) for m in inputs)
        ):
            msgs = list(inputs)
        else:
            raise TypeError("a GoalPipeline starts from a goal: a Msg or a non-empty list of Msgs")
        goal = [b for m in msgs for b in m.content if isinstance(b, TextBlock | DataBlock)]
        self._save(GoalProgress(goal=goal))
        return [*msgs, UserMsg("user", REPORT_HINT)]

    async def _execute(self, inputs: ReplyInputs, emit: Emit) -> Msg | None:
        """Executor attempts until one reports (``None``: the report is in the progress); the
        executor's Msg when it parks or ends without one."""
        sink = participant_sink(emit, self.executor)
        while True:
            schema = EXECUTION_REPORT_SCHEMA if not _is_resume(inputs) else None
            msg = await self.executor.reply(inputs, structured_schema=schema, on_event=sink)
            if msg.finished_reason in (None, ReplyFinishedReason.INTERRUPTED):
                return msg
            report = (msg.structured_output or {}).get("report")
            progress = self.progress
            if msg.finished_reason == ReplyFinishedReason.COMPLETED and isinstance(report, str):
                progress.report = report
                self._save(progress)
                return None
            progress.executor_retries += 1
            self._save(progress)
            self._check_budget(progress.executor_retries, "executor", "an execution report")
            inputs = UserMsg("user", REPORT_RETRY)

    async def _verify(self, inputs: ReplyInputs, emit: Emit) -> Msg:
        """Verifier attempts until one gives a verdict; its Msg (parked or interrupted ones
        too)."""
        sink = participant_sink(emit, self.verifier)
        progress = self.progress
        if inputs is None:
            inputs = UserMsg(
                "user",
                [
                    TextBlock(text=VERIFY_OPEN),
                    *progress.goal,
                    TextBlock(text=VERIFY_CLOSE.format(report=progress.report)),
                ],
            )
        while True:
            schema = VERIFICATION_SCHEMA if not _is_resume(inputs) else None
            msg = await self.verifier.reply(inputs, structured_schema=schema, on_event=sink)
            if msg.finished_reason in (None, ReplyFinishedReason.INTERRUPTED):
                return msg
            output = msg.structured_output
            if msg.finished_reason == ReplyFinishedReason.COMPLETED and output is not None:
                return msg
            progress = self.progress
            progress.verifier_retries += 1
            self._save(progress)
            self._check_budget(progress.verifier_retries, "verifier", "a verdict")
            if output is None:
                inputs = UserMsg(
                    "user",
                    [
                        TextBlock(text=VERDICT_RETRY_OPEN),
                        *progress.goal,
                        TextBlock(text=VERDICT_RETRY_CLOSE),
                    ],
                )

    def _check_budget(self, retries: int, who: str, what: str) -> None:
        if retries > self.max_retries:
            raise StructuredOutputError(
                f"the {who} did not produce {what} after {self.max_retries} retries"
            )

    # -- parked participants --------------------------------------------------------------------

    def _parked_on(self, reply_id: str) -> Agent:
        for agent in self.participants:
            if parked_on(agent, reply_id):
                return agent
        raise ValueError(f"no participant of the goal loop is parked on reply {reply_id!r}")

    async def _abort(self, emit: Emit) -> Msg | None:
        for agent in self.participants:
            if agent.state.has_awaiting_tool_calls(agent.name):
                inputs = UserInterruptEvent(reply_id=agent.state.reply_id)
                return await agent.reply(inputs, on_event=participant_sink(emit, agent))
        return None


def _is_resume(inputs: ReplyInputs) -> bool:
    return isinstance(
        inputs, UserConfirmResultEvent | ExternalExecutionResultEvent | UserInterruptEvent
    )
