"""The built-in tools: shell, files, search, questions for the user, and the task list."""

from ._ask_user import AskUser as AskUser, AskUserAnswer as AskUserAnswer
from ._bash import Bash as Bash
from ._edit import Edit as Edit, Write as Write
from ._read import Read as Read
from ._search import Glob as Glob, Grep as Grep
from ._tasks import (
    TaskCreate as TaskCreate,
    TaskGet as TaskGet,
    TaskList as TaskList,
    TaskUpdate as TaskUpdate,
)

__all__ = [
    "AskUser",
    "AskUserAnswer",
    "Bash",
    "Edit",
    "Glob",
    "Grep",
    "Read",
    "TaskCreate",
    "TaskGet",
    "TaskList",
    "TaskUpdate",
    "Write",
]
