"""``cancel_sweep``: cancel a reply at every schedule point and check the reply rules.

The reply is run once to count the schedule points its tasks pass through (a
``trio.abc.Instrument``), then re-run from scratch once per point, cancelling right after the
k-th one.  Each run must end with exactly one ``ReplyEndEvent`` as its last event (rule 1),
``interrupt()`` must leave the reply with its final Msg (rule 2),
leave a consistent, JSON-round-trippable context where every tool call has exactly one result
(rule 6), and leave no task and no busy HTTP connection behind (rule 7).

The swept object may also be a pipeline (``trioagent.pipeline``) or an agent calling agents
as tools: the rules then hold for every reply of every participant, each reply id having at
most one end, last among its events, and the outermost end last of all.

Run it under ``trio.testing.MockClock(autojump_threshold=0)`` (pytest-trio's
``autojump_clock`` fixture) so timers cost no real time.
"""

from __future__ import annotations

import collections
import contextlib
import enum
import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import attrs
import trio
import trio.lowlevel

from ..agent import Agent, AgentState, AgentTool
from ..event import AgentEvent, ReplyEndEvent, agent_path
from ..exception import TrioagentError
from ..message import Msg, ToolCallBlock, ToolCallState, ToolResultBlock
from ..serialization import dumps, loads

__all__ = [
    "CancelMode",
    "SweepReport",
    "SweepRun",
    "SweepViolation",
    "cancel_sweep",
    "check_nested_rules",
    "check_reply_rules",
]


class CancelMode(enum.StrEnum):
    """How each run is cancelled."""

    INTERRUPT = "interrupt"  #: ``agent.interrupt()``; ``reply()`` must return normally
    OUTER = "outer"  #: an enclosing cancel scope; ``trio.Cancelled`` must propagate


class SweepViolation(TrioagentError, AssertionError):
    """A run broke one of the reply rules; the message names the rule and the point."""


@attrs.define
class SweepRun:
    """What one run produced."""

    cancel_at: int | None
    events: list[AgentEvent]
    msg: Msg | None
    agent: Any
    error: BaseException | None = None
    propagated_cancel: bool = False
    steps: int = 0
    fired: bool = False

    @property
    def end(self) -> ReplyEndEvent | None:
        ends = [e for e in self.events if isinstance(e, ReplyEndEvent)]
        return ends[-1] if ends else None


@attrs.define
class SweepReport:
    """The sweep's outcome: the baseline's schedule points and each run's end reason."""

    points: int
    runs: list[SweepRun]

    @property
    def outcomes(self) -> collections.Counter[str]:
        return collections.Counter(
            str(run.end.finished_reason) if run.end else "parked" for run in self.runs
        )


class _StepCounter(trio.abc.Instrument):
    """Counts the schedule points of a task and its descendants; cancels at the k-th."""

    def __init__(
        self, root: trio.lowlevel.Task, cancel_at: int | None, cancel: Callable[[], None]
    ) -> None:
        self.root = root
        self.cancel_at = cancel_at
        self.cancel = cancel
        self.steps = 0
        self.fired = False

    def _watched(self, task: trio.lowlevel.Task) -> bool:
        current: trio.lowlevel.Task | None = task
        while current is not None:
            if current is self.root:
                return True
            nursery = current.parent_nursery
            current = nursery.parent_task if nursery is not None else None
        return False

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        if not self._watched(task):
            return
        self.steps += 1
        if self.steps == self.cancel_at and not self.fired:
            self.fired = True
            self.cancel()


#: Builds the swept object: an agent, or a pipeline (anything with an agent's entry points
#: and a ``participants`` list of agents).
MakeAgent = Callable[[], "Agent | Awaitable[Agent] | Any"]


async def cancel_sweep(
    make_agent: MakeAgent,
    inputs: Any | Callable[[], Any],
    *,
    mode: CancelMode | str = CancelMode.INTERRUPT,
    check: Callable[[SweepRun], None] | None = None,
    max_points: int | None = None,
    supervised: bool = False,
    structured_schema: Any = None,
    consumer_delay: float | None = None,
) -> SweepReport:
    """Cancel a reply after each of its schedule points and check the rules every time.

    Args:
        make_agent: builds a fresh agent (or pipeline) per run (sync or async), e.g. with a
            fresh ``ScriptedModel``.  It may be called inside a nursery of yours (for a loopback
            server), but the agent's reply must not depend on state left by an earlier run.
        inputs: the reply's inputs, or a callable producing them per run.
        mode: ``"interrupt"`` (``agent.interrupt()``) or ``"outer"`` (an enclosing scope).
        check: extra assertions per run.
        max_points: stop after this many points (for very long replies).
        supervised: run each reply inside ``async with agent:`` (the supervision scope of
            background tools).  Leaving that scope is then part of the swept schedule, and
            every background task must have ended with exactly one result when it is left.
        structured_schema: passed to each reply (a structured-output reply is swept; not
            for a pipeline).
        consumer_delay: a slow consumer: every run uses the callback form
            (``reply(on_event=...)``, in both modes) with a consumer that records each event
            and then sleeps this many seconds -- longer than ``interrupt_grace`` sweeps a
            consumer the cleanup cannot wait for (a stalled websocket client).

    Returns:
        A :class:`SweepReport`; raises :class:`SweepViolation` on the first broken rule.

    Two limits to know.  Trio randomises the order of runnable tasks, so the same reply can
    take a schedule point more or less from one run to the next: the points swept are those
    of the uncancelled baseline run, and a run that ends before its point reports
    ``fired=False`` (sweep more than once, or in both modes, for more coverage).  Rule 7
    ("no task outlives the reply") looks at the nurseries of the task calling the sweep (such
    as pytest-trio's ``nursery`` fixture), not at nurseries nested inside their tasks.
    """
    mode = CancelMode(mode)
    options = {
        "supervised": supervised,
        "structured_schema": structured_schema,
        "consumer_delay": consumer_delay,
    }
    baseline = await _run_once(make_agent, inputs, mode, None, **options)
    _check_run(baseline, mode)
    if check is not None:
        check(baseline)
    runs = [baseline]
    points = baseline.steps if max_points is None else min(baseline.steps, max_points)
    for k in range(1, points + 1):
        run = await _run_once(make_agent, inputs, mode, k, **options)
        _check_run(run, mode)
        if check is not None:
            check(run)
        runs.append(run)
    return SweepReport(points=baseline.steps, runs=runs)


async def _run_once(
    make_agent: MakeAgent,
    inputs: Any,
    mode: CancelMode,
    cancel_at: int | None,
    supervised: bool = False,
    structured_schema: Any = None,
    consumer_delay: float | None = None,
) -> SweepRun:
    agent = make_agent()
    if inspect.isawaitable(agent):
        agent = await agent
    run_inputs = inputs() if callable(inputs) else inputs
    before = _live_tasks()  # whatever make_agent started (a loopback server, ...) may stay
    run = SweepRun(cancel_at=cancel_at, events=[], msg=None, agent=agent)
    outer = trio.CancelScope()

    def cancel() -> None:
        if mode is CancelMode.INTERRUPT:
            agent.interrupt()
        else:
            outer.cancel()

    async def body() -> None:
        # Runs in its own task so the instrument counts this reply's tasks only.
        counter = _StepCounter(trio.lowlevel.current_task(), cancel_at, cancel)
        trio.lowlevel.add_instrument(counter)
        try:
            with outer:
                try:
                    async with agent if supervised else contextlib.nullcontext():
                        await drive()
                except trio.Cancelled:
                    run.propagated_cancel = True
                    raise
                except Exception as exc:
                    run.error = exc
                except BaseException as exc:
                    run.error = exc  # e.g. a group of cancellations: callers can't catch it
                    raise
        finally:
            trio.lowlevel.remove_instrument(counter)
            run.steps, run.fired = counter.steps, counter.fired

    schema = {} if structured_schema is None else {"structured_schema": structured_schema}

    async def drive() -> None:
        if mode is CancelMode.INTERRUPT and consumer_delay is None:
            # The channel form: the consumer keeps receiving after interrupt().
            stream = agent.stream(run_inputs, **schema)
            try:
                async with stream as reply:
                    async for event in reply:
                        run.events.append(event)
            finally:
                run.msg = stream.msg
        else:
            # The callback form: an outer cancellation also cancels a consumer reading a
            # channel, so only a callback can witness the INTERRUPTED end.
            async def record(event: AgentEvent) -> None:
                run.events.append(event)
                if consumer_delay is not None:
                    await trio.sleep(consumer_delay)

            run.msg = await agent.reply(run_inputs, on_event=record, **schema)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(body)
    _check_no_tasks_left(run, before)
    if supervised:
        _check_background_tasks(run)
    return run


def _live_tasks() -> set[trio.lowlevel.Task]:
    """Tasks in the nurseries of the calling task (e.g. a test's servers)."""
    return {t for n in trio.lowlevel.current_task().child_nurseries for t in n.child_tasks}


def _check_no_tasks_left(run: SweepRun, before: set[trio.lowlevel.Task]) -> None:
    leaked = _live_tasks() - before
    if leaked:
        raise SweepViolation(f"rule 7 (point {run.cancel_at}): a task outlived the reply: {leaked}")


def _check_background_tasks(run: SweepRun) -> None:
    """Rule 7 for background tools: leaving ``async with agent:`` ended every task, and each
    recorded its result."""
    for call_id, handle in run.agent.background_tasks.items():
        if handle.result is None:
            raise SweepViolation(
                f"rule 7 (point {run.cancel_at}): background call {call_id} is still running "
                "after `async with agent:` was left"
            )


def _check_run(run: SweepRun, mode: CancelMode) -> None:
    where = f"point {run.cancel_at}" if run.cancel_at is not None else "baseline"
    if run.error is not None:
        raise SweepViolation(f"({where}) the reply raised {run.error!r}") from run.error
    if mode is CancelMode.INTERRUPT and run.propagated_cancel:
        raise SweepViolation(f"({where}) agent.interrupt() let trio.Cancelled escape the reply")
    if mode is CancelMode.INTERRUPT and run.end is not None and run.msg is None:
        raise SweepViolation(f"rule 2 ({where}): the reply ended without its final Msg")
    if not run.events and not run.fired:
        # No cancellation explains it: a layer returned without running the reply.
        raise SweepViolation(f"rule 1 ({where}): the reply ended without a single event")
    agents = _agents_of(run.agent)
    if len(agents) == 1:
        check_reply_rules(run.agent.state, run.agent.name, run.events, where=where)
    else:
        check_nested_rules(agents, run.events, where=where)
    if (
        run.fired
        and mode is CancelMode.OUTER
        and not run.propagated_cancel
        and run.end is not None
        and run.end.finished_reason == "interrupted"
    ):
        raise SweepViolation(f"({where}) an outer cancellation was swallowed (rule 3)")
    for agent in agents:
        _check_connections(agent, where)


def _agents_of(target: Any) -> list[Any]:
    """The swept object's agents: a pipeline's participants, and every agent called as a tool
    (found in the toolkits, to any depth)."""
    found: list[Any] = []
    pending = list(getattr(target, "participants", None) or [target])
    while pending:
        agent = pending.pop(0)
        if any(agent is seen for seen in found):
            continue
        found.append(agent)
        toolkit = getattr(agent, "toolkit", None)
        if toolkit is not None:
            tools = toolkit.available_tools([g.name for g in toolkit.tool_groups])
            pending.extend(t.agent for t, _ in tools.values() if isinstance(t, AgentTool))
    return found


def check_nested_rules(
    agents: Sequence[Agent], events: Sequence[AgentEvent], *, where: str = ""
) -> None:
    """Rules 1 and 6 for a reply that ran several agents (a pipeline, agents as tools).

    Rule 1 per reply id: at most one ``ReplyEndEvent``, the last event of that reply; a reply
    without one must be its agent's parked reply.  Unless something is parked, the last event
    of all is an end, and an untagged end (the called agent's own) is the very last event.
    Rule 6 for every agent's state.
    """
    by_reply: dict[str, list[int]] = collections.defaultdict(list)
    for index, event in enumerate(events):
        by_reply[event.reply_id].append(index)
    parked = {a.state.reply_id for a in agents if a.state.has_awaiting_tool_calls(a.name)}
    ended: set[str] = set()
    for reply_id, indices in by_reply.items():
        ends = [i for i in indices if isinstance(events[i], ReplyEndEvent)]
        if len(ends) > 1:
            raise SweepViolation(
                f"rule 1 ({where}): reply {reply_id} has {len(ends)} ReplyEndEvents"
            )
        if ends and ends[0] != indices[-1]:
            raise SweepViolation(
                f"rule 1 ({where}): the ReplyEndEvent of reply {reply_id} is not its last event"
            )
        if ends:
            ended.add(reply_id)
        elif reply_id not in parked:
            raise SweepViolation(
                f"rule 1 ({where}): reply {reply_id} has no ReplyEndEvent and is not parked"
            )
    if events and not parked - ended:
        last = events[-1]
        if not isinstance(last, ReplyEndEvent):
            raise SweepViolation(f"rule 1 ({where}): the last event is not a ReplyEndEvent")
        own = [e for e in events if isinstance(e, ReplyEndEvent) and not agent_path(e)]
        if own and own[-1] is not last:
            raise SweepViolation(f"rule 1 ({where}): an inner reply ended after the outer one")
    for agent in agents:
        mine = [e for e in events if e.reply_id == agent.state.reply_id]
        check_reply_rules(
            agent.state,
            agent.name,
            mine,
            where=f"{where}, agent {agent.name!r}",
            parked=agent.state.reply_id in parked - ended,
        )


def check_reply_rules(
    state: AgentState,
    name: str,
    events: Sequence[AgentEvent],
    *,
    where: str = "",
    parked: bool | None = None,
) -> None:
    """Rules 1 and 6 for one reply's events and the agent's state afterwards.

    ``parked`` says whether the reply is parked; by default it is read from the events (some
    events, no end) and the state (calls still waiting).
    """
    ends = [i for i, e in enumerate(events) if isinstance(e, ReplyEndEvent)]
    # Parked: no end, and calls still wait for the user or an external result.  The last event
    # need not be a REQUIRE_* one (in a concurrent batch other calls finish after a prompt; a
    # partial resume parks again without a new prompt).
    if parked is None:
        parked = bool(events) and not ends and state.has_awaiting_tool_calls(name)
    if not events or (parked and not ends):
        pass  # cancelled before the reply started, or parked (no end until it resumes)
    elif len(ends) != 1:
        raise SweepViolation(f"rule 1 ({where}): {len(ends)} ReplyEndEvents, expected exactly one")
    elif ends[0] != len(events) - 1:
        raise SweepViolation(f"rule 1 ({where}): the ReplyEndEvent is not the last event")
    awaiting = {c.id for c in state.get_awaiting_tool_calls(name)} if parked and not ends else set()
    calls: dict[str, int] = collections.Counter()
    results: dict[str, int] = collections.Counter()
    for msg in state.context:
        for block in msg.content:
            if isinstance(block, ToolCallBlock):
                calls[block.id] += 1
                if (
                    block.id not in awaiting
                    and block.state != ToolCallState.FINISHED
                    and not parked
                ):
                    raise SweepViolation(
                        f"rule 6 ({where}): tool call {block.id} left in state {block.state}"
                    )
            elif isinstance(block, ToolResultBlock):
                results[block.id] += 1
    for call_id in calls:
        if call_id in awaiting:
            continue
        if results[call_id] != 1 and not (parked and results[call_id] == 0):
            raise SweepViolation(
                f"rule 6 ({where}): tool call {call_id} has {results[call_id]} results"
            )
    orphans = [r for r in results if r not in calls]
    if orphans:
        raise SweepViolation(f"rule 6 ({where}): results without a call: {orphans}")
    payload = dumps(state)
    if dumps(loads(payload, AgentState)) != payload:
        raise SweepViolation(f"rule 6 ({where}): the state does not round-trip through JSON")


def _check_connections(agent: Any, where: str) -> None:
    client = getattr(agent.model, "existing_http_client", None)
    pool = getattr(getattr(client, "_transport", None), "_pool", None)
    if pool is None:
        return
    busy = [c for c in pool.connections if not (c.is_idle() or c.is_closed())]
    if busy:
        raise SweepViolation(f"rule 7 ({where}): {len(busy)} HTTP connection(s) still in use")
