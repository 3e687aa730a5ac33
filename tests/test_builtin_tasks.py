"""The task tools as in AgentScope 2.0.11: creating tasks with sequential ids, listing and
showing them, updating fields and dependencies, completing (which unblocks dependents) and
deleting; and the agent's runtime hint that counts them."""

from __future__ import annotations

import json
from typing import Any

import pytest

from trioagent.agent import AgentState
from trioagent.exception import DeveloperOrientedException
from trioagent.message import ToolCallBlock
from trioagent.permission import PermissionContext, PermissionEngine
from trioagent.tool import TaskCreate, TaskGet, TaskList, TaskUpdate, Toolkit


def kit() -> Toolkit:
    return Toolkit([TaskCreate(), TaskGet(), TaskList(), TaskUpdate()])


async def use(toolkit: Toolkit, state: AgentState, name: str, **args: Any) -> tuple[str, str]:
    response = await toolkit.call_tool(
        ToolCallBlock(id="c", name=name, input=json.dumps(args)), state=state
    )
    return str(response.state), response.text()


async def test_create_list_get() -> None:
    toolkit, state = kit(), AgentState()
    assert await use(toolkit, state, "TaskList") == ("success", "No tasks available.")
    assert await use(toolkit, state, "TaskCreate", subject="Write tests", description="All") == (
        "success",
        "Task (id=1) created successfully: Write tests",
    )
    await use(
        toolkit, state, "TaskCreate", subject="Ship", description="Release", metadata={"k": 1}
    )
    assert [t.id for t in state.tasks_context.tasks] == ["1", "2"]
    assert await use(toolkit, state, "TaskList") == (
        "success",
        "1 [pending] Write tests\n2 [pending] Ship",
    )
    assert await use(toolkit, state, "TaskGet", task_id="2") == (
        "success",
        "Task (id=2): Ship\nStatus: pending\nDescription: Release\nMetadata: {'k': 1}",
    )
    assert await use(toolkit, state, "TaskGet", task_id="9") == ("error", "Task not found")


async def test_update_dependencies_complete_and_delete() -> None:
    toolkit, state = kit(), AgentState()
    for subject in ("a", "b", "c"):
        await use(toolkit, state, "TaskCreate", subject=subject, description="")
    assert await use(toolkit, state, "TaskUpdate", task_id="2", add_blocked_by=["1", "99"]) == (
        "success",
        "Update task (id=2) add_blocked_by.",
    )
    one, two, _three = state.tasks_context.tasks
    assert one.blocks == ["2"]
    assert two.blocked_by == ["1"]
    assert await use(toolkit, state, "TaskList") == (
        "success",
        "1 [pending] a\n2 [pending] b[blocked by 1]\n3 [pending] c",
    )
    _, done = await use(
        toolkit, state, "TaskUpdate", task_id="1", status="completed", owner="me", metadata={"x": 1}
    )
    assert done.startswith("Update task (id=1) status, owner, metadata.")
    assert done.endswith(
        "Call TaskList now to find your next available task or see if your work unblocked others."
    )
    assert two.blocked_by == []
    await use(toolkit, state, "TaskUpdate", task_id="3", add_blocks=["2"])
    assert await use(toolkit, state, "TaskUpdate", task_id="3", status="deleted") == (
        "success",
        "Task (id=3) has been deleted.",
    )
    assert [t.id for t in state.tasks_context.tasks] == ["1", "2"]
    assert two.blocked_by == []
    assert await use(toolkit, state, "TaskUpdate", task_id="1", metadata={"x": None}) == (
        "success",
        "Update task (id=1) metadata.\n\nTask completed. Call TaskList now to find your next "
        "available task or see if your work unblocked others.",
    )
    assert one.metadata == {}
    assert (await use(toolkit, state, "TaskUpdate", task_id="2"))[1].startswith(
        "No updates were made to the task (id=2)."
    )
    assert await use(toolkit, state, "TaskUpdate", task_id="7", status="completed") == (
        "error",
        "TaskNotFoundError: The task (id=7) does not exist.",
    )


async def test_ids_continue_after_the_highest_number() -> None:
    toolkit, state = kit(), AgentState()
    await use(toolkit, state, "TaskCreate", subject="a", description="")
    await use(toolkit, state, "TaskCreate", subject="b", description="")
    await use(toolkit, state, "TaskUpdate", task_id="1", status="deleted")
    await use(toolkit, state, "TaskCreate", subject="c", description="")
    assert [t.id for t in state.tasks_context.tasks] == ["2", "3"]


async def test_bad_status_is_an_input_error() -> None:
    toolkit, state = kit(), AgentState()
    await use(toolkit, state, "TaskCreate", subject="a", description="")
    status, message = await use(toolkit, state, "TaskUpdate", task_id="1", status="done")
    assert status == "error"
    assert message.startswith("Input validation failed for tool 'TaskUpdate'")


async def test_without_state_it_is_a_developer_error() -> None:
    with pytest.raises(DeveloperOrientedException, match="TaskList requires the agent state"):
        await TaskList().run({})


async def test_always_allowed() -> None:
    engine = PermissionEngine(PermissionContext(mode="dont_ask"))
    for tool in (TaskCreate(), TaskGet(), TaskList(), TaskUpdate()):
        assert (await engine.check_permission(tool, {})).behavior == "allow"
