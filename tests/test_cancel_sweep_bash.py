"""``cancel_sweep`` over a reply whose ``Bash`` call runs a child shell that starts a
grandchild: after every sweep point, in both modes, no process of that tree is alive (checked
by PID) and the context is consistent (the sweep's own rules: one end event, last; every call
with exactly one result).

Real subprocesses on the real clock.  The grandchild would sleep for 30 s, but the child kills
it after 0.3 s, so that the baseline completes quickly while an interrupted tree survives unless
the whole group is killed.
"""

from __future__ import annotations

import itertools
import pathlib

import pytest
from agent_kit import call, calls, make_agent, text, user
from process_kit import alive, recorded_pids, tree_command

from trioagent.agent import Agent, AgentState
from trioagent.message import ToolResultBlock
from trioagent.permission import PermissionBehavior, PermissionContext, PermissionRule
from trioagent.testing import SweepRun, cancel_sweep
from trioagent.tool import Bash, Toolkit


@pytest.mark.parametrize("mode", ["interrupt", "outer"])
async def test_sweep_bash_process_tree(mode: str, tmp_path: pathlib.Path) -> None:
    pid_files: dict[int, pathlib.Path] = {}
    counter = itertools.count()
    allow = PermissionRule(
        tool_name="Bash", rule_content="sh -c:*", behavior=PermissionBehavior.ALLOW, source="test"
    )

    def make() -> Agent:
        pid_file = tmp_path / f"pids-{next(counter)}"
        state = AgentState(permission_context=PermissionContext(allow_rules={"Bash": [allow]}))
        agent = make_agent(
            [
                calls(call("b1", "Bash", command=tree_command(pid_file, 30, stop_after=0.3))),
                text("done"),
            ],
            Toolkit([Bash()]),
            state=state,
        )
        pid_files[id(agent)] = pid_file
        return agent

    def no_process_left(run: SweepRun) -> None:
        pids = recorded_pids(pid_files[id(run.agent)])
        assert alive(pids) == [], f"alive after cancelling at point {run.cancel_at}"
        results = [
            b for m in run.agent.state.context for b in m.content if isinstance(b, ToolResultBlock)
        ]
        assert len(results) <= 1
        if run.end is not None and run.end.finished_reason == "completed":
            assert results[0].state == "success"

    report = await cancel_sweep(make, user, mode=mode, check=no_process_left)
    assert report.points > 0
    assert report.runs[0].end is not None
    assert report.runs[0].end.finished_reason == "completed"
    assert len(recorded_pids(pid_files[id(report.runs[0].agent)])) == 2
    assert report.outcomes["interrupted"] > 0
    # Some sweep points fell while the tree was running: it was killed, not waited for.
    started = [r for r in report.runs[1:] if len(recorded_pids(pid_files[id(r.agent)])) == 2]
    assert any(r.end is None or r.end.finished_reason == "interrupted" for r in started)
