"""Permission value types needed by the data model (re-exported by ``trioagent.permission``)."""

from __future__ import annotations

import enum

import attrs

__all__ = ["PermissionBehavior", "PermissionRule"]


class PermissionBehavior(enum.StrEnum):
    """What a permission check decided."""

    ALLOW = "allow"
    DENY = "deny"
    ASK = "ask"
    PASSTHROUGH = "passthrough"


@attrs.frozen(kw_only=True)
class PermissionRule:
    """An allow/deny/ask rule for one tool.

    ``rule_content`` of ``None`` (or empty) matches every invocation of the tool; otherwise the
    tool's ``match_rule`` decides.  ``source`` is free text ("userSettings", "suggested", ...).
    """

    tool_name: str
    rule_content: str | None = None
    behavior: PermissionBehavior = attrs.field(converter=PermissionBehavior)
    source: str = "session"
