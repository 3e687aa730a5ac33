"""PermissionEngine modes and rules (AgentScope's acceptance scenarios) and PermissionContext."""

from __future__ import annotations

import pytest

from trioagent.permission import (
    AdditionalWorkingDirectory,
    PermissionBehavior,
    PermissionContext,
    PermissionDecision,
    PermissionEngine,
    PermissionMode,
    PermissionRule,
)
from trioagent.serialization import dumps, loads
from trioagent.tool import ToolBase

ALLOW, DENY, ASK = PermissionBehavior.ALLOW, PermissionBehavior.DENY, PermissionBehavior.ASK
ALL_MODES = list(PermissionMode)


class FakeTool(ToolBase):
    """A tool whose own check, read-only flag and rule matching are configurable."""

    name = "fake"

    def __init__(
        self,
        *,
        read_only: bool = False,
        own: PermissionDecision | None = None,
        sync_match: bool = False,
    ) -> None:
        super().__init__()
        self.is_read_only = read_only
        self.own = own or PermissionDecision(PermissionBehavior.PASSTHROUGH, "no opinion")
        self.sync_match = sync_match
        self.own_checks = 0

    async def check_permissions(self, tool_input, context):  # type: ignore[no-untyped-def]
        self.own_checks += 1
        return self.own

    def match_rule(self, rule_content, tool_input):  # type: ignore[no-untyped-def,override]
        matched = rule_content is None or tool_input.get("path", "").startswith(rule_content)
        if self.sync_match:
            return matched

        async def later() -> bool:
            return matched

        return later()


def rule(behavior: PermissionBehavior, content: str | None = None) -> PermissionRule:
    return PermissionRule(tool_name="fake", rule_content=content, behavior=behavior, source="test")


def engine(
    mode: PermissionMode = PermissionMode.DEFAULT, *rules: PermissionRule
) -> PermissionEngine:
    permission_engine = PermissionEngine(PermissionContext(mode=mode))
    for r in rules:
        permission_engine.add_rule(r)
    return permission_engine


SUGGESTED = [PermissionRule(tool_name="fake", behavior="allow", source="suggested")]


async def test_rule_precedence():
    tool = FakeTool()
    decision = await engine(PermissionMode.DEFAULT, rule(DENY), rule(ALLOW)).check_permission(
        tool, {}
    )
    assert (decision.behavior, decision.message) == (DENY, "Permission to use fake has been denied")
    assert decision.decision_reason == "Rule: None"
    decision = await engine(PermissionMode.DEFAULT, rule(ASK), rule(ALLOW)).check_permission(
        tool, {}
    )
    assert (decision.behavior, decision.message) == (ASK, "Permission required for fake")
    assert decision.suggested_rules == SUGGESTED
    decision = await engine(
        PermissionMode.DEFAULT, rule(ALLOW), rule(ASK), rule(DENY)
    ).check_permission(tool, {})
    assert decision.behavior == DENY


@pytest.mark.parametrize("sync_match", [False, True], ids=["async-match", "sync-match"])
async def test_rule_content_matching_first_match_wins(sync_match):
    tool = FakeTool(sync_match=sync_match)
    permission_engine = engine(PermissionMode.DEFAULT, rule(DENY, "/etc"), rule(DENY, "/e"))
    decision = await permission_engine.check_permission(tool, {"path": "/etc/passwd"})
    assert (decision.behavior, decision.decision_reason) == (DENY, "Rule: /etc")
    decision = await permission_engine.check_permission(tool, {"path": "/home/me"})
    assert decision.behavior == ASK
    assert decision.decision_reason == "Mode: default"
    empty_content = engine(PermissionMode.DEFAULT, rule(ALLOW, ""))
    assert (await empty_content.check_permission(tool, {"path": "/x"})).behavior == ALLOW


async def test_allow_rule_sets_updated_input():
    tool_input = {"path": "/tmp/x"}
    decision = await engine(PermissionMode.DEFAULT, rule(ALLOW)).check_permission(
        FakeTool(), tool_input
    )
    assert decision == PermissionDecision(ALLOW, "Permission granted for fake", None, tool_input)


@pytest.mark.parametrize(
    ("mode", "reason"),
    [
        (PermissionMode.DEFAULT, "Mode: default"),
        (PermissionMode.ACCEPT_EDITS, "Mode: accept_edits"),
    ],
)
async def test_asking_modes_fall_back_to_ask_with_suggestions(mode, reason):
    decision = await engine(mode).check_permission(FakeTool(), {})
    assert decision.behavior == ASK
    assert decision.message == "Permission required for fake"
    assert decision.decision_reason == reason
    assert decision.suggested_rules == SUGGESTED


@pytest.mark.parametrize("mode", ALL_MODES)
async def test_read_only_tool_is_allowed_in_every_mode(mode):
    tool = FakeTool(read_only=True)
    decision = await engine(mode).check_permission(tool, {})
    assert decision.behavior == ALLOW
    assert decision.message == "Permission granted for fake (read-only invocation)"
    assert decision.decision_reason == "Read-only operations are auto-allowed"
    assert tool.own_checks == 0


@pytest.mark.parametrize(
    "mode", [PermissionMode.DEFAULT, PermissionMode.BYPASS, PermissionMode.DONT_ASK]
)
async def test_tool_allow_and_deny_are_returned_as_is(mode):
    for behavior in (ALLOW, DENY):
        own = PermissionDecision(behavior, "tool says so", "tool reason")
        assert await engine(mode, rule(ALLOW)).check_permission(FakeTool(own=own), {}) is own


async def test_safety_ask_against_allow_rules_per_mode():
    immune = PermissionDecision(ASK, "dangerous!", "dangerous path", bypass_immune=True)
    decision = await engine(PermissionMode.DEFAULT, rule(ALLOW)).check_permission(
        FakeTool(own=immune), {}
    )
    assert decision.behavior == ASK
    assert decision.message == "dangerous!"
    assert decision.suggested_rules == SUGGESTED

    plain = PermissionDecision(ASK, "maybe", bypass_immune=False)
    decision = await engine(PermissionMode.DEFAULT, rule(ALLOW)).check_permission(
        FakeTool(own=plain), {}
    )
    assert (decision.behavior, decision.message) == (ALLOW, "Permission granted for fake")

    for own in (immune, plain):
        decision = await engine(PermissionMode.BYPASS, rule(ALLOW)).check_permission(
            FakeTool(own=own), {}
        )
        assert decision.behavior == ALLOW
        decision = await engine(PermissionMode.BYPASS).check_permission(FakeTool(own=own), {})
        assert decision.behavior == ALLOW
        assert decision.message == "Permission granted for fake (bypass mode)"
        assert decision.decision_reason == "Bypass mode allows all operations"

    decision = await engine(PermissionMode.DONT_ASK, rule(ALLOW)).check_permission(
        FakeTool(own=immune), {}
    )
    assert decision.behavior == DENY
    assert decision.message == (
        "Permission denied for fake (dont_ask mode - ASK converted to DENY, user not available)"
    )
    assert decision.decision_reason == (
        "DONT_ASK mode converted ASK to DENY. Original reason: dangerous path"
    )
    assert decision.suggested_rules == SUGGESTED


async def test_explore_mode():
    tool = FakeTool()
    decision = await engine(PermissionMode.EXPLORE, rule(ALLOW)).check_permission(tool, {})
    assert decision.behavior == DENY
    assert decision.message == "Permission denied for fake (explore mode is read-only)"
    assert decision.decision_reason == "Explore mode does not allow modifications"
    assert tool.own_checks == 0  # the tool is never consulted in explore mode
    decision = await engine(PermissionMode.EXPLORE, rule(ASK)).check_permission(
        FakeTool(read_only=True), {}
    )
    assert decision.behavior == ASK
    assert decision.suggested_rules == SUGGESTED


async def test_bypass_mode_still_honours_deny_and_ask_rules():
    assert (
        await engine(PermissionMode.BYPASS, rule(DENY)).check_permission(FakeTool(), {})
    ).behavior == DENY
    assert (
        await engine(PermissionMode.BYPASS, rule(ASK)).check_permission(FakeTool(), {})
    ).behavior == ASK


async def test_dont_ask_mode_never_asks():
    decision = await engine(PermissionMode.DONT_ASK).check_permission(FakeTool(), {})
    assert decision.behavior == DENY
    assert decision.message == "Permission denied for fake (dont_ask mode - user not available)"
    assert decision.decision_reason == "User is not available to answer permission prompts"
    decision = await engine(PermissionMode.DONT_ASK, rule(ALLOW)).check_permission(FakeTool(), {})
    assert decision.behavior == ALLOW
    decision = await engine(PermissionMode.DONT_ASK, rule(ASK, None)).check_permission(
        FakeTool(), {}
    )
    assert decision.behavior == DENY
    assert decision.decision_reason == (
        "DONT_ASK mode converted ASK to DENY. Original reason: Rule: None"
    )
    assert decision.suggested_rules == SUGGESTED
    plain_ask = PermissionDecision(ASK, "please?")
    decision = await engine(PermissionMode.DONT_ASK).check_permission(FakeTool(own=plain_ask), {})
    assert decision.behavior == DENY


async def test_function_tool_default_decision_flows_through_the_engine():
    from trioagent.tool import FunctionTool

    tool = FunctionTool(lambda: None, name="fake")
    assert (await engine(PermissionMode.DEFAULT).check_permission(tool, {})).behavior == ASK
    assert (
        await engine(PermissionMode.DEFAULT, rule(ALLOW)).check_permission(tool, {})
    ).behavior == ALLOW


def test_add_rule_ignores_passthrough_and_persists_in_the_context():
    context = PermissionContext()
    permission_engine = PermissionEngine(context)
    permission_engine.add_rule(rule(ALLOW, "a"))
    permission_engine.add_rule(rule(ALLOW, "b"))
    permission_engine.add_rule(rule(DENY))
    permission_engine.add_rule(rule(ASK))
    permission_engine.add_rule(rule(PermissionBehavior.PASSTHROUGH))
    assert [r.rule_content for r in context.allow_rules["fake"]] == ["a", "b"]
    assert len(context.deny_rules["fake"]) == 1
    assert len(context.ask_rules["fake"]) == 1
    assert PermissionEngine().context == PermissionContext()


async def test_unknown_mode_is_rejected():
    context = PermissionContext()
    object.__setattr__(context, "mode", "weird")
    with pytest.raises(ValueError, match="Unknown permission mode"):
        await PermissionEngine(context).check_permission(FakeTool(), {})
    with pytest.raises(ValueError, match="weird"):
        PermissionContext(mode="weird")


def test_context_round_trips_through_serialization():
    context = PermissionContext(
        mode="accept_edits",
        working_directories={"/work": AdditionalWorkingDirectory(path="/work", source="user")},
    )
    permission_engine = PermissionEngine(context)
    permission_engine.add_rule(rule(ALLOW, "/tmp"))
    permission_engine.add_rule(rule(DENY))
    permission_engine.add_rule(
        PermissionRule(
            tool_name="Bash", rule_content="git:*", behavior="ask", source="userSettings"
        )
    )
    payload = dumps(context)
    again = loads(payload, PermissionContext)
    assert again == context
    assert again.mode is PermissionMode.ACCEPT_EDITS
    assert isinstance(again.allow_rules["fake"][0], PermissionRule)
    assert loads(dumps(PermissionContext()), PermissionContext) == PermissionContext()


def test_decision_defaults_and_conversion():
    decision = PermissionDecision("ask", "m")
    assert decision.behavior is PermissionBehavior.ASK
    assert (decision.decision_reason, decision.updated_input, decision.suggested_rules) == (
        None,
        None,
        None,
    )
    assert decision.bypass_immune is False
    with pytest.raises(ValueError, match="maybe"):
        PermissionDecision("maybe", "m")
