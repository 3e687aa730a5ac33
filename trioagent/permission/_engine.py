"""The permission engine: rules and modes → a :class:`PermissionDecision`.

Steps shared by the modes:

* **D** deny rules → DENY ``"Permission to use <t> has been denied"``
  (reason ``"Rule: <content>"``);
* **A** ask rules → ASK ``"Permission required for <t>"`` with suggestions;
* **R** read-only fast path (``tool.check_read_only``) → ALLOW;
* **T** the tool's own ``check_permissions``: ALLOW/DENY returned as is; a *safety* ASK
  (``bypass_immune``) handled per mode; a plain ASK or PASSTHROUGH continues;
* **L** allow rules → ALLOW ``"Permission granted for <t>"`` with ``updated_input`` = the input.

============  =========================================================================
mode          order and fallback
============  =========================================================================
default       D A R T L → ASK ``"Permission required for <t>"`` (reason ``"Mode: default"``)
accept_edits  same as default (reason ``"Mode: accept_edits"``)
explore       D A R → DENY (explore mode is read-only); T and L are never consulted
bypass        D A R T(ALLOW/DENY only) L → ALLOW (bypass mode)
dont_ask      D A(→DENY) R T(safety ASK→DENY) L → DENY (user not available); never ASK
============  =========================================================================

Rule matching: a rule with empty/``None`` content matches every call of its tool; otherwise
``tool.match_rule(content, input)`` decides (sync or async).  First matching rule wins.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable
from typing import TypeVar

import attrs

from .._core.json_types import JSONObject
from .._rules import PermissionBehavior, PermissionRule
from ._types import PermissionContext, PermissionDecision, PermissionMode, PermissionSubject

__all__ = ["PermissionEngine"]

T = TypeVar("T")


async def _maybe_await(value: Awaitable[T] | T) -> T:
    """Accept both sync and async implementations of a tool's permission hooks."""
    if inspect.isawaitable(value):
        return await value
    return value


class PermissionEngine:
    """Checks tool calls against a :class:`PermissionContext`.

    The engine mutates the context it is given (``add_rule``), so rules added while answering a
    confirmation persist with the agent state that owns the context.
    """

    def __init__(self, context: PermissionContext | None = None) -> None:
        self.context = context if context is not None else PermissionContext()

    def add_rule(self, rule: PermissionRule) -> None:
        """Append ``rule`` to the list for its tool and behavior (passthrough is ignored).

        Raises:
            TypeError: not a :class:`PermissionRule`.
            ValueError: a rule that could never match (a ``tool_name`` that is not a non-empty
                str, a ``rule_content`` that is neither a str nor ``None``).
        """
        if not isinstance(rule, PermissionRule):
            raise TypeError(f"add_rule takes a PermissionRule, got {type(rule).__name__}")
        if not isinstance(rule.tool_name, str) or not rule.tool_name:
            raise ValueError(f"a rule's tool_name must be a non-empty str, got {rule.tool_name!r}")
        if rule.rule_content is not None and not isinstance(rule.rule_content, str):
            raise ValueError(
                f"a rule's rule_content must be a str or None, got {rule.rule_content!r}"
            )
        table = self._rules(rule.behavior)
        if table is not None:
            table.setdefault(rule.tool_name, []).append(rule)

    def _rules(self, behavior: PermissionBehavior) -> dict[str, list[PermissionRule]] | None:
        """The context's rules of ``behavior`` by tool name (``None`` for passthrough)."""
        return {
            PermissionBehavior.ALLOW: self.context.allow_rules,
            PermissionBehavior.DENY: self.context.deny_rules,
            PermissionBehavior.ASK: self.context.ask_rules,
        }.get(behavior)

    async def check_permission(
        self, tool: PermissionSubject, tool_input: JSONObject
    ) -> PermissionDecision:
        """Decide whether ``tool`` may run with ``tool_input`` under the current mode.

        Raises:
            ValueError: the context's mode is not a :class:`PermissionMode`.
        """
        try:
            mode = PermissionMode(self.context.mode)
        except ValueError:
            raise ValueError(f"Unknown permission mode: {self.context.mode}") from None
        deny = await self._match(PermissionBehavior.DENY, tool, tool_input)
        if deny is not None:
            return deny
        ask = await self._match(PermissionBehavior.ASK, tool, tool_input)
        if ask is not None:
            ask.suggested_rules = await self._suggestions(tool, tool_input)
            return _ask_to_deny(tool, ask) if mode == PermissionMode.DONT_ASK else ask
        if await _maybe_await(tool.check_read_only(tool_input)):
            return _verdict(
                PermissionBehavior.ALLOW,
                f"Permission granted for {tool.name} (read-only invocation)",
                "Read-only operations are auto-allowed",
            )
        if mode == PermissionMode.EXPLORE:
            return _verdict(
                PermissionBehavior.DENY,
                f"Permission denied for {tool.name} (explore mode is read-only)",
                "Explore mode does not allow modifications",
            )
        decision = await _maybe_await(tool.check_permissions(tool_input, self.context))
        if decision.behavior in (PermissionBehavior.ALLOW, PermissionBehavior.DENY):
            return decision
        if _is_safety_ask(decision) and mode != PermissionMode.BYPASS:
            # A copy: a tool may hand the same decision object to concurrent checks.
            suggestions = await self._suggestions(tool, tool_input)
            safety = attrs.evolve(decision, suggested_rules=suggestions)
            return _ask_to_deny(tool, safety) if mode == PermissionMode.DONT_ASK else safety
        allow = await self._match(PermissionBehavior.ALLOW, tool, tool_input)
        if allow is not None:
            return allow
        if mode == PermissionMode.BYPASS:
            return _verdict(
                PermissionBehavior.ALLOW,
                f"Permission granted for {tool.name} (bypass mode)",
                "Bypass mode allows all operations",
            )
        if mode == PermissionMode.DONT_ASK:
            return _verdict(
                PermissionBehavior.DENY,
                f"Permission denied for {tool.name} (dont_ask mode - user not available)",
                "User is not available to answer permission prompts",
            )
        return PermissionDecision(
            behavior=PermissionBehavior.ASK,
            message=f"Permission required for {tool.name}",
            decision_reason=f"Mode: {mode.value}",
            suggested_rules=await self._suggestions(tool, tool_input),
        )

    # -- shared steps ------------------------------------------------------------------------

    async def _match(
        self, behavior: PermissionBehavior, tool: PermissionSubject, tool_input: JSONObject
    ) -> PermissionDecision | None:
        """The decision of the first ``behavior`` rule matching this call, if any.

        An allow rule runs the tool with this very input (``updated_input``).
        """
        rule = await self._first_match(self._rules(behavior) or {}, tool, tool_input)
        if rule is None:
            return None
        if behavior == PermissionBehavior.ALLOW:
            return PermissionDecision(
                behavior=behavior,
                message=f"Permission granted for {tool.name}",
                updated_input=tool_input,
            )
        message = (
            f"Permission to use {tool.name} has been denied"
            if behavior == PermissionBehavior.DENY
            else f"Permission required for {tool.name}"
        )
        return PermissionDecision(
            behavior=behavior, message=message, decision_reason=f"Rule: {rule.rule_content}"
        )

    async def _first_match(
        self,
        table: dict[str, list[PermissionRule]],
        tool: PermissionSubject,
        tool_input: JSONObject,
    ) -> PermissionRule | None:
        for rule in table.get(tool.name, []):
            if not rule.rule_content:
                return rule
            if await _maybe_await(tool.match_rule(rule.rule_content, tool_input)):
                return rule
        return None

    async def _suggestions(
        self, tool: PermissionSubject, tool_input: JSONObject
    ) -> list[PermissionRule] | None:
        suggestions = await _maybe_await(tool.generate_suggestions(tool_input))
        return None if suggestions is None else list(suggestions)


def _verdict(behavior: PermissionBehavior, message: str, reason: str) -> PermissionDecision:
    return PermissionDecision(behavior=behavior, message=message, decision_reason=reason)


def _is_safety_ask(decision: PermissionDecision) -> bool:
    return decision.behavior == PermissionBehavior.ASK and decision.bypass_immune


def _ask_to_deny(tool: PermissionSubject, ask: PermissionDecision) -> PermissionDecision:
    """dont_ask mode: the user cannot answer, so an ASK becomes a DENY (suggestions kept)."""
    return PermissionDecision(
        behavior=PermissionBehavior.DENY,
        message=(
            f"Permission denied for {tool.name} "
            "(dont_ask mode - ASK converted to DENY, user not available)"
        ),
        decision_reason=(
            f"DONT_ASK mode converted ASK to DENY. Original reason: {ask.decision_reason}"
        ),
        suggested_rules=ask.suggested_rules,
    )
