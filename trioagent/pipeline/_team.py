"""``TeamPipeline``: a leader assigns tasks to members through its ``TeamAssign`` tool.

``TeamAssign`` is an external tool of the leader: the leader parks on a round of assignments,
the pipeline runs the round and resumes the leader with the members' final answers as the
results.  The round is a nursery owned by the round: members run concurrently, the
assignments to one member one after another in call order, and no member task outlives it.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Sequence

import attrs
import trio

from .._core.chain import Chain, Kwargs, Layer
from .._core.concurrency import reraise_unwrapped
from .._core.emit import Emit as ChainEmit
from .._json_repair import json_loads_with_repair
from ..agent import ActingItem, Agent, ReplyInputs, answer_of
from ..event import (
    AgentEvent,
    ExternalExecutionResultEvent,
    ReplyEndEvent,
    RequireExternalExecutionEvent,
    UserConfirmResultEvent,
    UserInterruptEvent,
)
from ..exception import error_info
from ..message import (
    AssistantMsg,
    Msg,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    ToolResultState,
    UserMsg,
)
from ..middleware import TracingMiddleware
from ..permission import PermissionBehavior, PermissionDecision
from ..tool import ToolBase, ToolResponse
from ._base import Emit, PipelineBase, parked_on, participant_sink

__all__ = ["TEAM_ASSIGN", "TeamAssignTool", "TeamMember", "TeamPipeline"]

TEAM_ASSIGN = "TeamAssign"

PARKED_TEXT = "The member is waiting for a confirmation or an external result."
PARKED_LEADER_TEXT = "A member of the team is waiting for a confirmation or an external result."


@attrs.frozen
class TeamMember:
    """An agent of the team and what the leader reads about it to decide what to assign.

    The agent's name is how the leader names it: unique in the team.
    """

    agent: Agent
    description: str


class TeamAssignTool(ToolBase):
    """The leader's tool: name a member and a self-contained task.  External: the pipeline
    executes it by running the member, so the leader parks on it."""

    is_external_tool = True
    is_concurrency_safe = True

    def __init__(self, members: Sequence[TeamMember]) -> None:
        super().__init__()
        self.name = TEAM_ASSIGN
        roster = "\n".join(f"- {m.agent.name}: {m.description}" for m in members)
        self.description = (
            "Hand a task to one member of your team; its final answer comes back as this "
            f"call's result.  Calls in one turn run at the same time.  Your team:\n{roster}"
        )
        self.input_schema = {
            "type": "object",
            "properties": {
                "member": {
                    "type": "string",
                    "enum": [m.agent.name for m in members],
                    "description": "Who does the task.",
                },
                "prompt": {
                    "type": "string",
                    "description": (
                        "The whole task.  The member sees nothing of your conversation, so "
                        "say everything it needs to know."
                    ),
                },
            },
            "required": ["member", "prompt"],
        }

    async def check_permissions(self, tool_input: object, context: object) -> PermissionDecision:
        """Assigning is always allowed; each member's tools ask for themselves."""
        return PermissionDecision(
            behavior=PermissionBehavior.ALLOW, message="Assigning work to a member is allowed."
        )


class TeamPipeline(PipelineBase):
    """A leader agent that hands tasks to members and sees only their final answers.

    Args:
        leader: the agent that plans and assigns; it gets the ``TeamAssign`` tool (added to
            its toolkit here).
        members: the agents it assigns to (names unique, none the leader's).
        reset_members: clear every member's context (and summary) when the leader's reply
            ends, so each leader reply starts with fresh members; within one reply the leader
            can follow up with a member.

    Behaviour, as in AgentScope 2.0.11: the assignments of one leader turn run concurrently
    across members and in call order for one member; a member's final text and data become
    the call's result (interrupted or failed replies give an interrupted or error result);
    members never see each other.  A member that parks on a confirmation or an external
    execution streams its request unchanged (tagged with its name) and the pipeline's reply
    ends parked; the result event sent back is routed by ``reply_id`` to that member, its
    queued assignments follow, and the leader, parked on the assignments all along, resumes
    once the member finished.  A ``UserInterruptEvent`` aborts every parked participant.

    Differences, on purpose: a member whose reply raises gives the leader an error result
    (the leader can react) instead of failing the whole pipeline; cancelling the pipeline
    cancels the round's nursery and then aborts what is parked, inside Trio's cancellation
    rules (no re-run of the pipeline from an exception handler).
    """

    def __init__(
        self, leader: Agent, members: Sequence[TeamMember], reset_members: bool = True
    ) -> None:
        super().__init__()
        names = [m.agent.name for m in members]
        if not members or len(set(names)) != len(names) or leader.name in names:
            raise ValueError(
                "a team needs members with unique names, none of them the leader's; got "
                f"{names!r} with leader {leader.name!r}"
            )
        self.leader = leader
        self.members = {m.agent.name: m for m in members}
        self.reset_members = reset_members
        self._tool = TeamAssignTool(members)
        self._tracing: list[Layer[ActingItem]] = [
            functools.partial(mw.on_acting, leader)
            for mw in leader.middlewares
            if isinstance(mw, TracingMiddleware)
        ]
        existing = leader.toolkit.get_tool(TEAM_ASSIGN)
        if existing is None:
            leader.toolkit.add_tool(self._tool)
        elif not isinstance(existing, TeamAssignTool):
            raise ValueError(f"the leader's toolkit already has a tool named {TEAM_ASSIGN!r}")
        else:
            self._tool = existing

    @property
    def participants(self) -> list[Agent]:
        return [self.leader, *(m.agent for m in self.members.values())]

    # -- the drive ------------------------------------------------------------------------------

    async def _drive(self, inputs: ReplyInputs, emit: Emit) -> Msg:
        leader = self.leader
        if isinstance(inputs, UserInterruptEvent):
            await self._abort_members(emit)
            inputs = UserInterruptEvent(reply_id=leader.state.reply_id)
        elif (
            isinstance(inputs, UserConfirmResultEvent | ExternalExecutionResultEvent)
            and inputs.reply_id != leader.state.reply_id
        ):
            member = self._parked_member(inputs.reply_id)
            results = await self._round(self._queued_for(member), emit, resumed=inputs)
            if not results:
                return self._parked_msg()
            inputs = ExternalExecutionResultEvent(
                reply_id=leader.state.reply_id, execution_results=results
            )
        while True:
            assignments: list[ToolCallBlock] = []
            msg = await leader.reply(inputs, on_event=self._leader_sink(emit, assignments))
            if not assignments:
                return msg
            results = await self._round(assignments, emit)
            inputs = ExternalExecutionResultEvent(
                reply_id=leader.state.reply_id, execution_results=results
            )
            if len(results) < len(assignments):
                # A member parked: the leader takes what finished and stays parked on the rest.
                if results:
                    msg = await leader.reply(inputs, on_event=self._leader_sink(emit, []))
                return msg

    def _leader_sink(self, emit: Emit, assignments: list[ToolCallBlock]) -> Emit:
        """The leader's events: assignments are collected (the pipeline executes them, so
        their requests are not the caller's business), members reset at the leader's end."""
        sink = participant_sink(emit, self.leader)

        async def leader_sink(event: AgentEvent) -> None:
            if isinstance(event, RequireExternalExecutionEvent) and all(
                c.name == TEAM_ASSIGN for c in event.tool_calls
            ):
                assignments.extend(event.tool_calls)
                return
            await sink(event)
            if isinstance(event, ReplyEndEvent) and self.reset_members:
                for member in self.members.values():
                    member.agent.state.context.clear()
                    member.agent.state.summary = ""

        return leader_sink

    async def _round(
        self,
        calls: Sequence[ToolCallBlock],
        emit: Emit,
        resumed: UserConfirmResultEvent | ExternalExecutionResultEvent | None = None,
    ) -> list[ToolResultBlock]:
        """Run one round in a nursery it owns; the results of the finished calls, in call
        order.  With ``resumed`` the first call is the parked one and continues with it."""
        groups: dict[str, list[ToolCallBlock]] = {}
        for tool_call in calls:
            groups.setdefault(self._parse(tool_call)[0], []).append(tool_call)
        finished: dict[str, ToolResultBlock] = {}
        try:
            async with trio.open_nursery() as nursery:
                for name, group in groups.items():
                    first = resumed if resumed is not None and group[0] is calls[0] else None
                    nursery.start_soon(self._run_member, name, group, first, emit, finished)
        except BaseExceptionGroup as group:
            # Members turn their errors into results, so this holds cancellations: raise one
            # plain Cancelled, as a caller's ``except trio.Cancelled`` expects.
            reraise_unwrapped(group)
        return [finished[c.id] for c in calls if c.id in finished]

    async def _run_member(
        self,
        name: str,
        calls: list[ToolCallBlock],
        resumed: UserConfirmResultEvent | ExternalExecutionResultEvent | None,
        emit: Emit,
        finished: dict[str, ToolResultBlock],
    ) -> None:
        """One member's assignments, one after another; stops when the member parks (the
        rest stay queued in the leader's parked calls)."""
        agent = self.members[name].agent
        sink = participant_sink(emit, agent)
        for index, tool_call in enumerate(calls):
            inputs: ReplyInputs = (
                resumed
                if index == 0 and resumed is not None
                else UserMsg("user", self._parse(tool_call)[1])
            )
            run = functools.partial(_assignment, agent, inputs, sink)
            answer = await self._traced(tool_call, run)
            if answer is None:
                return  # parked on a confirmation or an external result
            finished[tool_call.id] = ToolResultBlock(
                id=tool_call.id, name=TEAM_ASSIGN, output=list(answer.content), state=answer.state
            )

    async def _traced(
        self, tool_call: ToolCallBlock, run: Callable[[], Awaitable[ToolResponse | None]]
    ) -> ToolResponse | None:
        """Run an assignment inside the leader's tracing middlewares' tool span, so the
        member's spans nest under the leader's ``TeamAssign`` call."""
        if not self._tracing:
            return await run()
        outcome: list[ToolResponse | None] = []

        async def core(kwargs: Kwargs, emit: ChainEmit[ActingItem]) -> None:
            answer = await run()
            outcome.append(answer)
            parked = ToolResponse(content=[TextBlock(text=PARKED_TEXT)])
            await emit(answer if answer is not None else parked)

        async def drop(item: ActingItem) -> None:
            pass

        await Chain(self._tracing, core).run({"tool_call": tool_call}, drop)
        return outcome[0]

    # -- parked participants --------------------------------------------------------------------

    async def _abort(self, emit: Emit) -> Msg | None:
        await self._abort_members(emit)
        leader = self.leader
        if not leader.state.has_awaiting_tool_calls(leader.name):
            return None
        inputs = UserInterruptEvent(reply_id=leader.state.reply_id)
        return await leader.reply(inputs, on_event=self._leader_sink(emit, []))

    async def _abort_members(self, emit: Emit) -> None:
        for member in self._parked_members():
            agent = member.agent
            inputs = UserInterruptEvent(reply_id=agent.state.reply_id)
            await agent.reply(inputs, on_event=participant_sink(emit, agent))

    def _parked_members(self) -> list[TeamMember]:
        return [
            m for m in self.members.values() if m.agent.state.has_awaiting_tool_calls(m.agent.name)
        ]

    def _parked_member(self, reply_id: str) -> TeamMember:
        for member in self._parked_members():
            if parked_on(member.agent, reply_id):
                return member
        raise ValueError(f"no participant of the team is parked on reply {reply_id!r}")

    def _queued_for(self, member: TeamMember) -> list[ToolCallBlock]:
        """The leader's unanswered assignments to ``member``, in call order (the first is the
        one the member is parked in)."""
        name = member.agent.name
        return [
            c
            for c in self.leader.state.get_awaiting_tool_calls(self.leader.name)
            if c.name == TEAM_ASSIGN and self._parse(c)[0] == name
        ]

    def _parked_msg(self) -> Msg:
        """The pipeline's answer while a member is parked (the leader waits on it), shaped as
        a parked agent's final Msg."""
        leader = self.leader
        return AssistantMsg(leader.name, PARKED_LEADER_TEXT, id=leader.state.reply_id)

    def _parse(self, tool_call: ToolCallBlock) -> tuple[str, str]:
        """The member and the prompt of an assignment, parsed as the leader validated it."""
        data = json_loads_with_repair(tool_call.input, self._tool.input_schema)
        if not isinstance(data, dict):
            raise ValueError(f"assignment {tool_call.id!r} has no object input")
        return str(data.get("member", "")), str(data.get("prompt", ""))


async def _assignment(agent: Agent, inputs: ReplyInputs, sink: Emit) -> ToolResponse | None:
    """One assignment's reply; its answer, or ``None`` when the member parked."""
    try:
        msg = await agent.reply(inputs, on_event=sink)
    except Exception as exc:  # the member's ERROR end was streamed; tell the leader
        text = f"The member failed: {error_info(exc).message}"
        return ToolResponse(content=[TextBlock(text=text)], state=ToolResultState.ERROR)
    if msg.finished_reason is None:
        return None
    return answer_of(msg, agent.name)
