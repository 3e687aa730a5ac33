"""Permissions: modes, allow/ask/deny rules, and the engine that turns them into decisions."""

from .._rules import PermissionBehavior as PermissionBehavior, PermissionRule as PermissionRule
from ._engine import PermissionEngine as PermissionEngine
from ._types import (
    AdditionalWorkingDirectory as AdditionalWorkingDirectory,
    PermissionContext as PermissionContext,
    PermissionDecision as PermissionDecision,
    PermissionMode as PermissionMode,
    PermissionSubject as PermissionSubject,
)

__all__ = [
    "AdditionalWorkingDirectory",
    "PermissionBehavior",
    "PermissionContext",
    "PermissionDecision",
    "PermissionEngine",
    "PermissionMode",
    "PermissionRule",
    "PermissionSubject",
]
