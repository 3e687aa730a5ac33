"""Permission data: modes, the persisted context, and the decision a check produces.

:class:`PermissionContext` lives in the agent's state and is persisted with it, so it is an attrs
class that round-trips through :mod:`trioagent.serialization`.  :class:`PermissionDecision` is the
transient answer of one check.  :class:`PermissionSubject` is what the engine needs of a tool.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Sequence
from typing import Protocol

import attrs

from .._core.json_types import JSONObject
from .._rules import PermissionBehavior, PermissionRule

__all__ = [
    "AdditionalWorkingDirectory",
    "PermissionContext",
    "PermissionDecision",
    "PermissionMode",
    "PermissionSubject",
]


class PermissionMode(enum.StrEnum):
    """How the engine treats calls no rule decides.

    * ``default`` — ask the user unless a rule, the read-only fast path or the tool allows it.
    * ``accept_edits`` — same algorithm; tools' own checks auto-allow edits inside the working
      directories.
    * ``explore`` — read-only: anything not read-only is denied; allow rules are not consulted.
    * ``bypass`` — allow everything not denied/asked by a rule or denied by the tool; a tool's
      safety ASK is ignored.  For sandboxes only.
    * ``dont_ask`` — nobody is there to answer: every ASK becomes DENY.
    """

    DEFAULT = "default"
    ACCEPT_EDITS = "accept_edits"
    EXPLORE = "explore"
    BYPASS = "bypass"
    DONT_ASK = "dont_ask"


@attrs.define(kw_only=True)
class AdditionalWorkingDirectory:
    """A directory (besides the process's cwd) in which edits count as "inside the project"."""

    path: str
    source: str = "session"


def _rule_dict() -> dict[str, list[PermissionRule]]:
    return {}


@attrs.define(kw_only=True)
class PermissionContext:
    """The persisted permission settings of one agent.

    ``allow_rules`` / ``deny_rules`` / ``ask_rules`` map a tool name to its rules, in the order
    they were added (first match wins).  ``working_directories`` maps a path to its
    :class:`AdditionalWorkingDirectory`.
    """

    mode: PermissionMode = attrs.field(default=PermissionMode.DEFAULT, converter=PermissionMode)
    working_directories: dict[str, AdditionalWorkingDirectory] = attrs.field(factory=dict)
    allow_rules: dict[str, list[PermissionRule]] = attrs.field(factory=_rule_dict)
    deny_rules: dict[str, list[PermissionRule]] = attrs.field(factory=_rule_dict)
    ask_rules: dict[str, list[PermissionRule]] = attrs.field(factory=_rule_dict)


@attrs.define
class PermissionDecision:
    """The outcome of a permission check.

    Attributes:
        behavior: allow, deny, ask or passthrough (a tool deferring to the engine).
        message: human-readable text; a DENY's message becomes the denied tool result.
        decision_reason: why (``"Rule: <content>"``, ``"Mode: default"``, ...).
        updated_input: when set on an ALLOW, the input the tool runs with.
        suggested_rules: rules the user may add to avoid being asked again.
        bypass_immune: a tool's *safety* ASK, which allow rules cannot silence (bypass mode
            still ignores it; dont_ask turns it into DENY).
    """

    behavior: PermissionBehavior = attrs.field(converter=PermissionBehavior)
    message: str
    decision_reason: str | None = None
    updated_input: JSONObject | None = None
    suggested_rules: list[PermissionRule] | None = None
    bypass_immune: bool = False


class PermissionSubject(Protocol):
    """What :class:`~trioagent.permission.PermissionEngine` needs of the tool being checked.

    Every tool (``trioagent.tool.ToolBase``) is one.  Each hook may be sync or async.
    """

    @property
    def name(self) -> str:
        """The tool's name: the key of its rules."""
        ...

    def check_permissions(
        self, tool_input: JSONObject, context: PermissionContext
    ) -> Awaitable[PermissionDecision] | PermissionDecision:
        """The tool's own opinion on this call (PASSTHROUGH defers to the engine)."""
        ...

    def check_read_only(self, tool_input: JSONObject) -> Awaitable[bool] | bool:
        """Whether this call has no side effects (allowed without asking)."""
        ...

    def match_rule(
        self, rule_content: str | None, tool_input: JSONObject
    ) -> Awaitable[bool] | bool:
        """Whether a rule's content matches this call."""
        ...

    def generate_suggestions(
        self, tool_input: JSONObject
    ) -> Awaitable[Sequence[PermissionRule] | None] | Sequence[PermissionRule] | None:
        """Rules to offer the user when asking."""
        ...
