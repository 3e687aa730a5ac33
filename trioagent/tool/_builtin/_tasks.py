"""The task tools: ``TaskCreate``, ``TaskGet``, ``TaskList``, ``TaskUpdate``.

They manage the agent state's task list (``state.tasks_context.tasks``), which the agent's
runtime-state hint counts ("You have N in-progress tasks ... Use `TaskList`"); a call of one of
them in the context tells the agent the model already knows its tasks.  Always allowed;
state-injected.
"""

from __future__ import annotations

from typing import Any

from ..._core.json_types import JSONObject, JSONValue
from ...exception import DeveloperOrientedException
from ...message import TextBlock
from ...permission import PermissionBehavior, PermissionContext, PermissionDecision
from .._base import ToolBase
from .._response import Emit, ToolChunk
from .._state import Task, TaskState
from ._common import error

__all__ = ["TaskCreate", "TaskGet", "TaskList", "TaskUpdate"]


def _tasks(tool: ToolBase, state: object) -> list[Task]:
    tasks = getattr(getattr(state, "tasks_context", None), "tasks", None)
    if not isinstance(tasks, list):
        raise DeveloperOrientedException(
            f"{tool.name} requires the agent state (with tasks_context.tasks) to be injected, "
            f"got {type(state).__name__}"
        )
    return tasks


def _text(text: str) -> ToolChunk:
    return ToolChunk(content=[TextBlock(text=text)])


def _ids(value: JSONValue) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []


class _TaskTool(ToolBase):
    is_concurrency_safe = True
    is_state_injected = True

    async def check_permissions(
        self, tool_input: JSONObject, context: PermissionContext
    ) -> PermissionDecision:
        """Always allowed: it only changes the agent's own task list."""
        return PermissionDecision(
            behavior=PermissionBehavior.ALLOW,
            message=f"{self.name} is always allowed to be called.",
        )


class TaskCreate(_TaskTool):
    """Adds a pending task; ids are sequential numbers ("1", "2", ...)."""

    name = "TaskCreate"
    description = """Use this tool to create a structured task list for your current session. This helps you track progress, organize complex tasks, and demonstrate thoroughness to the user.
It also helps the user understand the progress of the task and overall progress of their requests.

## When to Use This Tool
- Complex multi-step tasks (3 or more distinct steps), non-trivial tasks that need planning, plan mode, an explicit request for a todo list, a list of things to do from the user, new instructions to capture as tasks.
- When you start working on a task, mark it as in_progress BEFORE beginning work; after completing it, mark it as completed and add any follow-up tasks.

## When NOT to Use This Tool
- There is only **one single, straightforward** task, the task is trivial, it takes fewer than 3 trivial steps, or it is purely conversational.

## Task Fields
- **subject**: A brief, actionable title in imperative form (e.g., "Fix authentication bug in login flow")
- **description**: What needs to be done

All tasks are created with status `pending`. Use TaskUpdate to set up dependencies (blocks/blockedBy); check TaskList first to avoid duplicates."""
    input_schema: JSONObject = {  # noqa: RUF012
        "type": "object",
        "properties": {
            "subject": {"type": "string", "description": "A brief title for the task"},
            "description": {"type": "string", "description": "What needs to be done"},
            "metadata": {
                "anyOf": [{"type": "object", "additionalProperties": True}, {"type": "null"}],
                "default": None,
                "description": "Arbitrary metadata to attach to the task",
            },
        },
        "required": ["subject", "description"],
    }

    async def call(
        self,
        emit: Emit,
        /,
        subject: str = "",
        description: str = "",
        metadata: dict[str, Any] | None = None,
        _agent_state: object = None,
        **_: object,
    ) -> ToolChunk:
        """Append the task to the state."""
        tasks = _tasks(self, _agent_state)
        numbers = [int(t.id) for t in tasks if t.id.isdigit()]
        task = Task(
            id=str(max(numbers, default=0) + 1),
            subject=subject,
            description=description,
            metadata=dict(metadata or {}),
        )
        tasks.append(task)
        return _text(f"Task (id={task.id}) created successfully: {task.subject}")


class TaskGet(_TaskTool):
    """Shows one task in full."""

    name = "TaskGet"
    description = """Use this tool to retrieve a task by its ID from the task list.

## When to Use This Tool
- When you need the full description and context before starting work on a task
- To understand task dependencies (what it blocks, what blocks it)
- After being assigned a task, to get complete requirements

## Output
Returns full task details: **subject**, **description**, **status** ('pending', 'in_progress', or 'completed'), **blocks** (tasks waiting on this one) and **blockedBy** (tasks that must complete first).

## Tips
- After fetching a task, verify its blockedBy list is empty before beginning work.
- Use TaskList to see all tasks in summary form."""
    input_schema: JSONObject = {  # noqa: RUF012
        "type": "object",
        "properties": {
            "task_id": {"type": "string", "description": "The ID of the task to retrieve"}
        },
        "required": ["task_id"],
    }

    async def call(
        self, emit: Emit, /, task_id: str = "", _agent_state: object = None, **_: object
    ) -> ToolChunk:
        """The task's fields, one per line."""
        task = next((t for t in _tasks(self, _agent_state) if t.id == task_id), None)
        if task is None:
            return error("Task not found")
        lines = [
            f"Task (id={task.id}): {task.subject}",
            f"Status: {task.state}",
            f"Description: {task.description}",
        ]
        if task.owner:
            lines.append(f"Owner: {task.owner}")
        if task.blocked_by:
            lines.append("Blocked by: " + ", ".join(f"#{i}" for i in task.blocked_by))
        if task.blocks:
            lines.append("Blocks: " + ", ".join(f"#{i}" for i in task.blocks))
        if task.metadata:
            lines.append(f"Metadata: {task.metadata}")
        return _text("\n".join(lines))


class TaskList(_TaskTool):
    """Lists every task on one line each."""

    name = "TaskList"
    description = """Use this tool to list all tasks in the task list.

## When to Use This Tool
- To see what tasks are available to work on (status: 'pending', no owner, not blocked)
- To check overall progress on the project
- To find tasks that are blocked and need dependencies resolved
- After completing a task, to check for newly unblocked work or claim the next available task
- **Prefer working on tasks in ID order** (lowest ID first) when multiple tasks are available, as earlier tasks often set up context for later ones

## Output
Returns a summary of each task: **id** (use with TaskGet, TaskUpdate), **subject**, **status**, **owner** (empty if available) and **blockedBy** (open task IDs that must be resolved first).

Use TaskGet with a specific task ID to view full details including description and comments."""
    input_schema: JSONObject = {"type": "object", "properties": {}}  # noqa: RUF012

    async def call(self, emit: Emit, /, _agent_state: object = None, **_: object) -> ToolChunk:
        """``<id> [<state>] <subject>(<owner>)[blocked by ...]`` per task."""
        tasks = _tasks(self, _agent_state)
        if not tasks:
            return _text("No tasks available.")
        return _text(
            "\n".join(
                f"{t.id} [{t.state}] {t.subject}"
                + (f"({t.owner})" if t.owner else "")
                + (f"[blocked by {', '.join(t.blocked_by)}]" if t.blocked_by else "")
                for t in tasks
            )
        )


class TaskUpdate(_TaskTool):
    """Changes a task's fields, links dependencies, completes or deletes it."""

    name = "TaskUpdate"
    description = """Use this tool to update a task in the task list.

## When to Use This Tool
**Mark tasks as resolved:** when you have completed the work (ONLY when FULLY accomplished: not with failing tests, partial work or unresolved errors; when blocked, keep it in_progress and create a new task for the blocker), or when a task is no longer needed. After resolving, call TaskList to find your next task.

**Delete tasks:** setting status to `deleted` permanently removes the task.

**Update task details:** when requirements change or dependencies are established.

## Fields You Can Update
- **status**: `pending` → `in_progress` → `completed`, or `deleted`
- **subject**, **description**, **owner**
- **metadata**: merge keys into the task (set a key to null to delete it)
- **add_blocks**: tasks that cannot start until this one completes
- **add_blocked_by**: tasks that must complete before this one can start

Read a task's latest state with `TaskGet` before updating it.

## Examples
```json
{"task_id": "1", "status": "in_progress"}
{"task_id": "1", "status": "completed"}
{"task_id": "2", "add_blocked_by": ["1"]}
```"""
    input_schema: JSONObject = {  # noqa: RUF012
        "type": "object",
        "properties": {
            "task_id": {"type": "string", "description": "The task id."},
            "subject": {
                "anyOf": [{"type": "string"}, {"type": "null"}],
                "default": None,
                "description": "New subject for the task",
            },
            "description": {
                "anyOf": [{"type": "string"}, {"type": "null"}],
                "default": None,
                "description": "New description for the task",
            },
            "add_blocks": {
                "anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}],
                "default": None,
                "description": "Task IDs that this task blocks",
            },
            "status": {
                "anyOf": [
                    {"enum": ["pending", "in_progress", "completed", "deleted"], "type": "string"},
                    {"type": "null"},
                ],
                "default": None,
                "description": "New status for the task",
            },
            "add_blocked_by": {
                "anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}],
                "default": None,
                "description": "Task IDs that block this task",
            },
            "owner": {
                "anyOf": [{"type": "string"}, {"type": "null"}],
                "default": None,
                "description": "New owner for the task",
            },
            "metadata": {
                "anyOf": [{"type": "object", "additionalProperties": True}, {"type": "null"}],
                "default": None,
                "description": "Metadata keys to merge into the task. Set a key to null to "
                "delete it.",
            },
        },
        "required": ["task_id"],
    }

    async def call(
        self, emit: Emit, /, task_id: str = "", _agent_state: object = None, **fields: JSONValue
    ) -> ToolChunk:
        """Apply the given fields to the task ``task_id``."""
        tasks = _tasks(self, _agent_state)
        task = next((t for t in tasks if t.id == task_id), None)
        if task is None:
            return error(f"TaskNotFoundError: The task (id={task_id}) does not exist.")
        status = fields.get("status")
        if status == "deleted":
            tasks.remove(task)
            for other in tasks:
                for links in (other.blocks, other.blocked_by):
                    if task_id in links:
                        links.remove(task_id)
            return _text(f"Task (id={task_id}) has been deleted.")
        updated = _apply(task, tasks, fields)
        if isinstance(status, str) and status:
            updated.append("status")
            task.state = TaskState(status)
            if task.state == TaskState.COMPLETED:
                for other in tasks:
                    if task_id in other.blocked_by:
                        other.blocked_by.remove(task_id)
        owner = fields.get("owner")
        if isinstance(owner, str):
            updated.append("owner")
            task.owner = owner
        metadata = fields.get("metadata")
        if isinstance(metadata, dict) and metadata:
            updated.append("metadata")
            for key, value in metadata.items():
                if value is None:
                    task.metadata.pop(key, None)
                else:
                    task.metadata[key] = value
        if updated:
            text = f"Update task (id={task_id}) {', '.join(updated)}."
        else:
            text = (
                f"No updates were made to the task (id={task_id}). Make sure you provided at "
                "least one field to update and the values are correct."
            )
        if task.state == TaskState.COMPLETED:
            text += (
                "\n\nTask completed. Call TaskList now to find your next available task or see "
                "if your work unblocked others."
            )
        return _text(text)


def _apply(task: Task, tasks: list[Task], fields: dict[str, JSONValue]) -> list[str]:
    """Subject, description and the dependency links; returns the names of changed fields."""
    updated: list[str] = []
    subject, description = fields.get("subject"), fields.get("description")
    if isinstance(subject, str) and subject:
        updated.append("subject")
        task.subject = subject
    if isinstance(description, str):
        updated.append("description")
        task.description = description
    existing = {t.id for t in tasks}
    blocks = [i for i in _ids(fields.get("add_blocks")) if i not in task.blocks and i in existing]
    if blocks:
        updated.append("add_blocks")
        for other in blocks:
            _link(tasks, blocker=task.id, blocked=other)
    blocked_by = [
        i for i in _ids(fields.get("add_blocked_by")) if i not in task.blocked_by and i in existing
    ]
    if blocked_by:
        updated.append("add_blocked_by")
        for other in blocked_by:
            _link(tasks, blocker=other, blocked=task.id)
    return updated


def _link(tasks: list[Task], *, blocker: str, blocked: str) -> None:
    for task in tasks:
        if task.id == blocker and blocked not in task.blocks:
            task.blocks.append(blocked)
        if task.id == blocked and blocker not in task.blocked_by:
            task.blocked_by.append(blocker)
