"""``cancel_sweep``: cancel a reply at every schedule point and check the reply rules.

The reply is run once to count the schedule points its tasks pass through (a
``trio.abc.Instrument``), then re-run from scratch once per point, cancelling right after the
k-th one.  Each run must end with exactly one ``ReplyEndEvent`` as its last event (rule 1),
leave a consistent, JSON-round-trippable context where every tool call has exactly one result
(rule 6), and leave no task and no busy HTTP connection behind (rule 7).

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

from ..agent import Agent, AgentState
from ..event import (
    AgentEvent,
    ReplyEndEvent,
)
from ..exception import TrioagentError
from ..message import Msg, ToolCallBlock, ToolCallState, ToolResultBlock
from ..serialization import dumps, loads

__all__ = [
    "CancelMode",
    "SweepReport",
    "SweepRun",
    "SweepViolation",
    "cancel_sweep",
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


MakeAgent = Callable[[], "Agent | Awaitable[Agent]"]


async def cancel_sweep(
    make_agent: MakeAgent,
    inputs: Any | Callable[[], Any],
    *,
    mode: CancelMode | str = CancelMode.INTERRUPT,
    check: Callable[[SweepRun], None] | None = None,
    max_points: int | None = None,
    supervised: bool = False,
    structured_schema: Any = None,
) -> SweepReport:
    """Cancel a reply after each of its schedule points and check the rules every time.

    Args:
        make_agent: builds a fresh agent per run (sync or async), e.g. with a fresh
            ``ScriptedModel``.  It may be called inside a nursery of yours (for a loopback
            server), but the agent's reply must not depend on state left by an earlier run.
        inputs: the reply's inputs, or a callable producing them per run.
        mode: ``"interrupt"`` (``agent.interrupt()``) or ``"outer"`` (an enclosing scope).
        check: extra assertions per run.
        max_points: stop after this many points (for very long replies).
        supervised: run each reply inside ``async with agent:`` (the supervision scope of
            background tools).  Leaving that scope is then part of the swept schedule, and
            every background task must have ended with exactly one result when it is left.
        structured_schema: passed to each reply (a structured-output reply is swept).

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
    options = {"supervised": supervised, "structured_schema": structured_schema}
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

    async def drive() -> None:
        if mode is CancelMode.INTERRUPT:
            # The channel form: the consumer keeps receiving after interrupt().
            stream = agent.stream(run_inputs, structured_schema=structured_schema)
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

            run.msg = await agent.reply(
                run_inputs, structured_schema=structured_schema, on_event=record
            )

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
    if not run.events and not run.fired:
        # No cancellation explains it: a layer returned without running the reply.
        raise SweepViolation(f"rule 1 ({where}): the reply ended without a single event")
    check_reply_rules(run.agent.state, run.agent.name, run.events, where=where)
    if (
        run.fired
        and mode is CancelMode.OUTER
        and not run.propagated_cancel
        and run.end is not None
        and run.end.finished_reason == "interrupted"
    ):
        raise SweepViolation(f"({where}) an outer cancellation was swallowed (rule 3)")
    _check_connections(run.agent, where)


def check_reply_rules(
    state: AgentState, name: str, events: Sequence[AgentEvent], *, where: str = ""
) -> None:
    """Rules 1 and 6 for one reply's events and the agent's state afterwards."""
    ends = [i for i, e in enumerate(events) if isinstance(e, ReplyEndEvent)]
    # Parked: no end, and calls still wait for the user or an external result.  The last event
    # need not be a REQUIRE_* one (in a concurrent batch other calls finish after a prompt; a
    # partial resume parks again without a new prompt).
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
