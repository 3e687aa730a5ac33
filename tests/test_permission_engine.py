"""PermissionEngine edge cases: every mode crossed with every rule and tool behaviour.

Complements ``test_permission.py``.  Every expected string, the tool-side defaults and the
order of the steps are AgentScope 2.0.11's.  The steps, shared by the modes:

* D: deny rules → DENY;
* A: ask rules → ASK with suggestions;
* R: the read-only fast path (``tool.check_read_only(input)``) → ALLOW;
* T: the tool's own ``check_permissions(input, context)``;
* L: allow rules → ALLOW with ``updated_input=input``;

then each mode's fallback.
"""

from __future__ import annotations

import copy
from typing import Any

import attrs
import pytest

from trioagent.agent import AgentState
from trioagent.permission import (
    AdditionalWorkingDirectory,
    PermissionBehavior,
    PermissionContext,
    PermissionDecision,
    PermissionEngine,
    PermissionMode,
    PermissionRule,
)
from trioagent.serialization import SerializationError, dumps, loads
from trioagent.tool import ToolBase

ALLOW = PermissionBehavior.ALLOW
DENY = PermissionBehavior.DENY
ASK = PermissionBehavior.ASK
PASSTHROUGH = PermissionBehavior.PASSTHROUGH

DEFAULT = PermissionMode.DEFAULT
ACCEPT_EDITS = PermissionMode.ACCEPT_EDITS
EXPLORE = PermissionMode.EXPLORE
BYPASS = PermissionMode.BYPASS
DONT_ASK = PermissionMode.DONT_ASK
ALL_MODES = list(PermissionMode)

# -- AgentScope's exact strings ------------------------------------------------------------------
DENIED_BY_RULE = "Permission to use probe has been denied"
REQUIRED = "Permission required for probe"
GRANTED = "Permission granted for probe"
READ_ONLY_MSG = "Permission granted for probe (read-only invocation)"
READ_ONLY_REASON = "Read-only operations are auto-allowed"
EXPLORE_MSG = "Permission denied for probe (explore mode is read-only)"
EXPLORE_REASON = "Explore mode does not allow modifications"
BYPASS_MSG = "Permission granted for probe (bypass mode)"
BYPASS_REASON = "Bypass mode allows all operations"
DONT_ASK_MSG = "Permission denied for probe (dont_ask mode - user not available)"
DONT_ASK_REASON = "User is not available to answer permission prompts"
CONVERTED_MSG = (
    "Permission denied for probe (dont_ask mode - ASK converted to DENY, user not available)"
)


def converted_reason(original: str | None) -> str:
    return f"DONT_ASK mode converted ASK to DENY. Original reason: {original}"


# The default suggestion of ToolBase.generate_suggestions: one tool-level allow rule.
DEFAULT_SUGGESTION = [
    PermissionRule(tool_name="probe", rule_content=None, behavior=ALLOW, source="suggested")
]

# -- the tool's own check_permissions answers -------------------------------------------------------
OWN_ALLOW = PermissionDecision(ALLOW, "tool allows", "tool reason", {"path": "/rewritten"})
OWN_DENY = PermissionDecision(DENY, "tool denies", "tool reason")
PLAIN_ASK = PermissionDecision(ASK, "tool asks", "tool reason")
SAFETY_ASK = PermissionDecision(ASK, "tool insists", "dangerous path", bypass_immune=True)
OWN_PASS = PermissionDecision(PASSTHROUGH, "no opinion")
OWN = {
    "allow": OWN_ALLOW,
    "deny": OWN_DENY,
    "plain-ask": PLAIN_ASK,
    "safety-ask": SAFETY_ASK,
    "passthrough": OWN_PASS,
}


class Probe(ToolBase):
    """A tool recording every permission hook the engine calls.

    ``match_rule`` is a path-prefix match on ``tool_input["path"]``, the stand-in for a
    tool-specific rule syntax (the engine itself only delegates rule matching to the tool).
    """

    name = "probe"

    def __init__(
        self,
        *,
        read_only: bool | None = None,
        own: PermissionDecision | None = None,
        suggestions: list[PermissionRule] | None = None,
        name: str | None = None,
    ) -> None:
        super().__init__()
        if name is not None:
            self.name = name
        self.read_only = read_only
        self.own = own if own is not None else OWN_PASS
        self.suggestions = suggestions
        self.calls: list[tuple[str, Any]] = []

    def hooks(self) -> list[str]:
        return [hook for hook, _ in self.calls]

    async def check_permissions(
        self, tool_input: dict[str, Any], context: PermissionContext
    ) -> PermissionDecision:
        self.calls.append(("check_permissions", (tool_input, context)))
        # A copy per call, as FunctionTool does, so the engine's edits stay local to one check.
        return copy.deepcopy(self.own)

    async def check_read_only(self, tool_input: dict[str, Any]) -> bool:
        self.calls.append(("check_read_only", tool_input))
        if self.read_only is None:  # input-dependent: reads are read-only
            return tool_input.get("op") == "read"
        return self.read_only

    async def match_rule(self, rule_content: str | None, tool_input: dict[str, Any]) -> bool:
        self.calls.append(("match_rule", (rule_content, tool_input)))
        return str(tool_input.get("path", "")).startswith(str(rule_content))

    async def generate_suggestions(self, tool_input: dict[str, Any]) -> list[PermissionRule]:
        self.calls.append(("generate_suggestions", tool_input))
        if self.suggestions is None:
            return await super().generate_suggestions(tool_input)
        return self.suggestions


def rule(
    behavior: PermissionBehavior,
    content: str | None = None,
    *,
    tool: str = "probe",
    source: str = "test",
) -> PermissionRule:
    return PermissionRule(tool_name=tool, rule_content=content, behavior=behavior, source=source)


def make_engine(mode: PermissionMode, *rules: PermissionRule) -> PermissionEngine:
    permission_engine = PermissionEngine(PermissionContext(mode=mode))
    for r in rules:
        permission_engine.add_rule(r)
    return permission_engine


def summary(decision: PermissionDecision) -> tuple[Any, ...]:
    return (
        decision.behavior,
        decision.message,
        decision.decision_reason,
        decision.updated_input,
        decision.suggested_rules,
    )


WRITE = {"op": "write", "path": "/work/src/a.py"}
READ = {"op": "read", "path": "/work/src/a.py"}


# -- mode x rule behaviour x read-only ----------------------------------------------------------------
# The order and fallback of every mode: D and A come before R in every mode,
# R before L; explore never consults L; dont_ask converts A to DENY.  The tool defers
# (PASSTHROUGH) throughout this table.


def expected_for_rule(mode: PermissionMode, kind: str, read_only: bool) -> tuple[Any, ...]:
    tool_input = READ if read_only else WRITE
    if kind == "deny":
        return (DENY, DENIED_BY_RULE, "Rule: None", None, None)
    if kind == "ask":
        if mode == DONT_ASK:
            return (DENY, CONVERTED_MSG, converted_reason("Rule: None"), None, DEFAULT_SUGGESTION)
        return (ASK, REQUIRED, "Rule: None", None, DEFAULT_SUGGESTION)
    if read_only:
        return (ALLOW, READ_ONLY_MSG, READ_ONLY_REASON, None, None)
    if mode == EXPLORE:
        return (DENY, EXPLORE_MSG, EXPLORE_REASON, None, None)
    if kind == "allow":
        return (ALLOW, GRANTED, None, tool_input, None)
    return {
        DEFAULT: (ASK, REQUIRED, "Mode: default", None, DEFAULT_SUGGESTION),
        ACCEPT_EDITS: (ASK, REQUIRED, "Mode: accept_edits", None, DEFAULT_SUGGESTION),
        BYPASS: (ALLOW, BYPASS_MSG, BYPASS_REASON, None, None),
        DONT_ASK: (DENY, DONT_ASK_MSG, DONT_ASK_REASON, None, None),
    }[mode]


RULE_KINDS = {"deny": DENY, "ask": ASK, "allow": ALLOW, "none": None}


@pytest.mark.parametrize("read_only", [False, True], ids=["writes", "read-only"])
@pytest.mark.parametrize("kind", list(RULE_KINDS))
@pytest.mark.parametrize("mode", ALL_MODES)
async def test_mode_by_rule_by_read_only(mode, kind, read_only):
    behavior = RULE_KINDS[kind]
    rules = [rule(behavior)] if behavior is not None else []
    tool = Probe()
    tool_input = READ if read_only else WRITE
    decision = await make_engine(mode, *rules).check_permission(tool, tool_input)
    assert summary(decision) == expected_for_rule(mode, kind, read_only)
    assert decision.bypass_immune is False
    # The tool's own check runs only when D, A and R all passed and the mode consults it.
    consulted = kind in ("allow", "none") and not read_only and mode != EXPLORE
    assert tool.hooks().count("check_permissions") == int(consulted)
    # Suggestions are generated exactly for the decisions that carry them.
    assert tool.hooks().count("generate_suggestions") == int(decision.suggested_rules is not None)


# -- mode x the tool's own check_permissions x allow rule ---------------------------------------------
# T returns ALLOW/DENY as is; a safety ASK (bypass_immune) is returned with
# suggestions in default/accept_edits, falls through in bypass, is converted to DENY in dont_ask; a
# plain ASK or PASSTHROUGH continues to L and the fallback.  Explore never consults T.  "own" = the
# tool's decision is returned (with suggestions attached for a safety ASK).


def expected_for_own(mode: PermissionMode, own: str, allow_rule: bool) -> tuple[Any, ...] | str:
    if mode == EXPLORE:
        return (DENY, EXPLORE_MSG, EXPLORE_REASON, None, None)
    if own in ("allow", "deny"):
        return "own"
    if own == "safety-ask" and mode in (DEFAULT, ACCEPT_EDITS):
        return "own"
    if own == "safety-ask" and mode == DONT_ASK:
        return (DENY, CONVERTED_MSG, converted_reason("dangerous path"), None, DEFAULT_SUGGESTION)
    if allow_rule:
        return (ALLOW, GRANTED, None, WRITE, None)
    return expected_for_rule(mode, "none", read_only=False)


@pytest.mark.parametrize("allow_rule", [False, True], ids=["no-allow-rule", "allow-rule"])
@pytest.mark.parametrize("own", list(OWN))
@pytest.mark.parametrize("mode", ALL_MODES)
async def test_mode_by_tool_decision_by_allow_rule(mode, own, allow_rule):
    tool = Probe(own=OWN[own], read_only=False)
    rules = [rule(ALLOW)] if allow_rule else []
    decision = await make_engine(mode, *rules).check_permission(tool, dict(WRITE))
    expected = expected_for_own(mode, own, allow_rule)
    if expected == "own":
        want = OWN[own]
        assert decision.behavior == want.behavior
        assert (decision.message, decision.decision_reason) == (want.message, want.decision_reason)
        assert decision.updated_input == want.updated_input
        assert decision.bypass_immune == want.bypass_immune
        if own == "safety-ask":
            assert decision.suggested_rules == DEFAULT_SUGGESTION
        else:
            assert decision.suggested_rules is None
    else:
        assert summary(decision) == expected
    assert tool.hooks().count("check_permissions") == (0 if mode == EXPLORE else 1)


@pytest.mark.parametrize("mode", [BYPASS, DONT_ASK])
async def test_dont_ask_and_bypass_never_return_ask_without_an_ask_rule(mode):
    # dont_ask never returns ASK; bypass lets every tool ASK fall through.
    for own in OWN.values():
        for rules in ([], [rule(ALLOW)], [rule(ALLOW, "/nope")], [rule(ASK, "/nope")]):
            for tool_input in (WRITE, READ):
                tool = Probe(own=own)
                decision = await make_engine(mode, *rules).check_permission(tool, tool_input)
                assert decision.behavior in (ALLOW, DENY)


async def test_tool_decisions_returned_as_is_are_the_same_object():
    # T's ALLOW/DENY is returned as is — the very object, updated_input included.
    own = PermissionDecision(ALLOW, "fine", updated_input={"path": "/safe"})

    class SharedDecision(Probe):
        async def check_permissions(self, tool_input, context):  # type: ignore[no-untyped-def]
            return own

    for mode in (DEFAULT, ACCEPT_EDITS, BYPASS, DONT_ASK):
        decision = await make_engine(mode, rule(ALLOW)).check_permission(SharedDecision(), WRITE)
        assert decision is own
        assert decision.updated_input == {"path": "/safe"}


async def test_passthrough_flagged_bypass_immune_is_not_a_safety_ask():
    # A safety ASK is an ASK with bypass_immune; a PASSTHROUGH never is.
    odd = PermissionDecision(PASSTHROUGH, "meh", bypass_immune=True)
    decision = await make_engine(DEFAULT, rule(ALLOW)).check_permission(Probe(own=odd), WRITE)
    assert summary(decision) == (ALLOW, GRANTED, None, WRITE, None)
    decision = await make_engine(DONT_ASK).check_permission(Probe(own=odd), WRITE)
    assert (decision.message, decision.decision_reason) == (DONT_ASK_MSG, DONT_ASK_REASON)


# -- order of the shared steps -----------------------------------------------------------------------
# D → A → R → T → L, so deny+allow → DENY, ask+allow → ASK and deny+ask+allow → DENY,
# checked in every mode and in every insertion order.


@pytest.mark.parametrize("mode", ALL_MODES)
async def test_precedence_is_by_behaviour_not_insertion_order_or_source(mode):
    orders = [
        [rule(ALLOW, source="userSettings"), rule(ASK), rule(DENY, source="session")],
        [rule(DENY, source="session"), rule(ASK), rule(ALLOW, source="userSettings")],
        [rule(ASK, source="projectSettings"), rule(ALLOW), rule(DENY, source="suggested")],
    ]
    for rules in orders:
        for tool_input in (WRITE, READ):
            decision = await make_engine(mode, *rules).check_permission(Probe(), tool_input)
            assert (decision.behavior, decision.message) == (DENY, DENIED_BY_RULE)
    for rules in ([rule(ALLOW), rule(ASK)], [rule(ASK), rule(ALLOW)]):
        decision = await make_engine(mode, *rules).check_permission(Probe(), WRITE)
        if mode == DONT_ASK:
            assert (decision.behavior, decision.message) == (DENY, CONVERTED_MSG)
        else:
            assert (decision.behavior, decision.message) == (ASK, REQUIRED)


@pytest.mark.parametrize("mode", ALL_MODES)
async def test_rules_are_consulted_before_the_tool_and_read_only(mode):
    # D and A are steps 1-2 in every mode: a safety ASK or a read-only tool never gets a say.
    for read_only in (False, True):
        tool = Probe(own=SAFETY_ASK, read_only=read_only)
        decision = await make_engine(mode, rule(DENY, "/work")).check_permission(tool, WRITE)
        assert (decision.behavior, decision.decision_reason) == (DENY, "Rule: /work")
        tool_2 = Probe(own=OWN_DENY, read_only=read_only)
        decision = await make_engine(mode, rule(ASK, "/work")).check_permission(tool_2, WRITE)
        assert decision.behavior == (DENY if mode == DONT_ASK else ASK)
        assert decision.message == (CONVERTED_MSG if mode == DONT_ASK else REQUIRED)
        for t in (tool, tool_2):
            assert "check_permissions" not in t.hooks()
            assert "check_read_only" not in t.hooks()


@pytest.mark.parametrize("mode", ALL_MODES)
async def test_read_only_comes_before_the_tool_check(mode):
    # R (step 3) precedes T: a read-only call is allowed even if the tool would deny or insist.
    for own in (OWN_DENY, SAFETY_ASK):
        tool = Probe(own=own, read_only=True)
        decision = await make_engine(mode, rule(ALLOW)).check_permission(tool, WRITE)
        assert summary(decision) == (ALLOW, READ_ONLY_MSG, READ_ONLY_REASON, None, None)
        assert tool.hooks() == ["check_read_only"]


async def test_check_read_only_is_input_dependent():
    # check_read_only(tool_input) returns is_read_only by default and input-dependent tools
    # override it; the engine awaits it with the call's input (step R).
    tool = Probe()  # read-only iff op == "read"
    permission_engine = make_engine(EXPLORE)
    assert (await permission_engine.check_permission(tool, READ)).message == READ_ONLY_MSG
    assert (await permission_engine.check_permission(tool, WRITE)).message == EXPLORE_MSG
    assert [payload for hook, payload in tool.calls if hook == "check_read_only"] == [READ, WRITE]


async def test_default_read_only_flag_comes_from_the_class_attribute():
    class ReadOnly(ToolBase):
        name = "probe"
        is_read_only = True

    for mode in ALL_MODES:
        decision = await make_engine(mode).check_permission(ReadOnly(), {})
        assert summary(decision) == (ALLOW, READ_ONLY_MSG, READ_ONLY_REASON, None, None)


async def test_the_tool_check_receives_the_input_and_the_engines_context():
    # Step T: `await tool.check_permissions(input, context)`.
    tool = Probe()
    permission_engine = make_engine(ACCEPT_EDITS)
    permission_engine.context.working_directories["/work"] = AdditionalWorkingDirectory(
        path="/work", source="user"
    )
    await permission_engine.check_permission(tool, WRITE)
    [(tool_input, context)] = [p for h, p in tool.calls if h == "check_permissions"]
    assert tool_input == WRITE
    assert context is permission_engine.context


async def test_accept_edits_lets_the_tool_auto_allow_edits_in_working_directories():
    # Edits are auto-allowed only because tools' own check_permissions consult the mode and
    # the working directories — the engine itself does nothing special for accept_edits.
    class Editor(Probe):
        async def check_permissions(self, tool_input, context):  # type: ignore[no-untyped-def]
            inside = self._path_in_allowed_working_path(tool_input["path"], context)
            if context.mode == ACCEPT_EDITS and inside:
                return PermissionDecision(ALLOW, "edit inside working directory")
            return PermissionDecision(PASSTHROUGH, "no opinion")

    context = PermissionContext(
        mode=ACCEPT_EDITS,
        working_directories={"/srv/proj": AdditionalWorkingDirectory(path="/srv/proj")},
    )
    permission_engine = PermissionEngine(context)
    inside = {"path": "/srv/proj/a.py"}
    outside = {"path": "/srv/other/a.py"}
    decision = await permission_engine.check_permission(Editor(), inside)
    assert (decision.behavior, decision.message) == (ALLOW, "edit inside working directory")
    decision = await permission_engine.check_permission(Editor(), outside)
    assert summary(decision) == (ASK, REQUIRED, "Mode: accept_edits", None, DEFAULT_SUGGESTION)
    context.mode = DEFAULT
    decision = await permission_engine.check_permission(Editor(), inside)
    assert summary(decision) == (ASK, REQUIRED, "Mode: default", None, DEFAULT_SUGGESTION)


async def test_the_mode_is_read_at_every_check():
    context = PermissionContext()
    permission_engine = PermissionEngine(context)
    assert permission_engine.context is context
    seen = []
    for mode in ALL_MODES:
        context.mode = mode
        seen.append((await permission_engine.check_permission(Probe(), WRITE)).message)
    assert seen == [REQUIRED, REQUIRED, EXPLORE_MSG, BYPASS_MSG, DONT_ASK_MSG]
    context.mode = "bypass"  # the converter applies on assignment too
    assert context.mode is BYPASS
    with pytest.raises(ValueError, match="'plan' is not a valid PermissionMode"):
        context.mode = "plan"
    assert context.mode is BYPASS


# -- rule matching --------------------------------------------------------------------------------------
# An empty or None rule_content matches every invocation; otherwise tool.match_rule(content,
# input) decides. The first matching rule in list order wins.


async def test_empty_and_none_content_match_without_asking_the_tool():
    for content in (None, ""):
        tool = Probe()
        decision = await make_engine(DEFAULT, rule(DENY, content)).check_permission(
            tool, {"path": "/anything"}
        )
        assert (decision.behavior, decision.decision_reason) == (DENY, f"Rule: {content}")
        assert "match_rule" not in tool.hooks()
    # The reason spells the content: None → "Rule: None", "" → "Rule: " (an f-string in steps
    # D and A).
    decision = await make_engine(DEFAULT, rule(ASK, "")).check_permission(Probe(), WRITE)
    assert decision.decision_reason == "Rule: "


async def test_match_rule_gets_the_content_and_input_and_the_first_match_wins():
    tool = Probe()
    rules = [
        rule(DENY, "/etc", source="a"),
        rule(DENY, "/work/src", source="b"),
        rule(DENY, "/work", source="c"),
    ]
    tool_input = {"path": "/work/src/a.py"}
    decision = await make_engine(DEFAULT, *rules).check_permission(tool, tool_input)
    assert decision.decision_reason == "Rule: /work/src"
    # Rules are tried in list order and the search stops at the first match.
    assert [p for h, p in tool.calls if h == "match_rule"] == [
        ("/etc", tool_input),
        ("/work/src", tool_input),
    ]


async def test_non_matching_rules_fall_through_to_the_next_step():
    tool_input = {"path": "/home/me/notes"}
    rules = [rule(DENY, "/etc"), rule(ASK, "/root"), rule(ALLOW, "/home/me")]
    decision = await make_engine(DEFAULT, *rules).check_permission(Probe(), tool_input)
    assert summary(decision) == (ALLOW, GRANTED, None, tool_input, None)
    decision = await make_engine(DEFAULT, *rules).check_permission(Probe(), {"path": "/tmp/x"})
    assert summary(decision) == (ASK, REQUIRED, "Mode: default", None, DEFAULT_SUGGESTION)
    decision = await make_engine(DEFAULT, *rules).check_permission(Probe(), {"path": "/root/x"})
    assert summary(decision) == (ASK, REQUIRED, "Rule: /root", None, DEFAULT_SUGGESTION)


async def test_rules_apply_only_to_the_tool_they_are_filed_under():
    # The rule dicts are keyed by tool name; rules of other tools never match.
    rules = [rule(DENY, tool="other"), rule(ASK, tool="Probe"), rule(ALLOW, tool="probe ")]
    decision = await make_engine(DEFAULT, *rules).check_permission(Probe(), WRITE)
    assert summary(decision) == (ASK, REQUIRED, "Mode: default", None, DEFAULT_SUGGESTION)
    other = Probe(name="other")
    decision = await make_engine(DEFAULT, *rules).check_permission(other, WRITE)
    assert (decision.behavior, decision.message) == (
        DENY,
        "Permission to use other has been denied",
    )


async def test_default_match_rule_only_matches_tool_level_rules():
    # By default match_rule(rule_content, tool_input) is True iff rule_content is None, so a
    # content rule never matches a tool that does not define a rule syntax.
    class Plain(ToolBase):
        name = "probe"

    tool = Plain()
    assert await tool.match_rule(None, {}) is True
    assert await tool.match_rule("*", {}) is False
    for content in ("*", "**", "/", " ", "probe"):
        decision = await make_engine(DEFAULT, rule(DENY, content)).check_permission(tool, {})
        assert summary(decision) == (ASK, REQUIRED, "Mode: default", None, DEFAULT_SUGGESTION)
    decision = await make_engine(DEFAULT, rule(ALLOW, "*")).check_permission(tool, {})
    assert decision.behavior == ASK


async def test_sync_hooks_are_accepted():
    # AgentScope accepts a sync or async match_rule; the port accepts every hook sync.
    class SyncTool(ToolBase):
        name = "probe"

        def check_read_only(self, tool_input):  # type: ignore[no-untyped-def,override]
            return tool_input.get("op") == "read"

        def check_permissions(self, tool_input, context):  # type: ignore[no-untyped-def,override]
            return PermissionDecision(PASSTHROUGH, "no opinion")

        def match_rule(self, rule_content, tool_input):  # type: ignore[no-untyped-def,override]
            return tool_input["path"].startswith(rule_content)

        def generate_suggestions(self, tool_input):  # type: ignore[no-untyped-def,override]
            return [rule(ALLOW, tool_input["path"], source="suggested")]

    tool = SyncTool()
    assert (await make_engine(DEFAULT).check_permission(tool, READ)).message == READ_ONLY_MSG
    decision = await make_engine(DEFAULT, rule(ALLOW, "/work")).check_permission(tool, WRITE)
    assert summary(decision) == (ALLOW, GRANTED, None, WRITE, None)
    decision = await make_engine(DEFAULT).check_permission(tool, WRITE)
    assert decision.suggested_rules == [rule(ALLOW, "/work/src/a.py", source="suggested")]


# -- suggestions -----------------------------------------------------------------------------------------
# Suggestions = await tool.generate_suggestions(input), attached to A, to the default/accept_edits
# fallback ASK, to a returned safety ASK, and preserved by the dont_ask conversion; by default
# one tool-level allow rule.


async def test_default_suggestion_is_one_tool_level_allow_rule():
    class Plain(ToolBase):
        name = "Grep"

    [suggestion] = await Plain().generate_suggestions({"pattern": "x"})
    assert suggestion == PermissionRule(
        tool_name="Grep", rule_content=None, behavior=ALLOW, source="suggested"
    )
    decision = await make_engine(DEFAULT).check_permission(Plain(), {"pattern": "x"})
    assert decision.suggested_rules == [suggestion]
    # Accepting the suggestion silences the next prompt (the human-in-the-loop confirmation flow).
    permission_engine = make_engine(DEFAULT)
    for suggested in decision.suggested_rules:
        permission_engine.add_rule(suggested)
    decision = await permission_engine.check_permission(Plain(), {"pattern": "y"})
    assert (decision.behavior, decision.message) == (ALLOW, "Permission granted for Grep")


CUSTOM = [
    rule(ALLOW, "/work/src", source="suggested"),
    rule(ALLOW, "/work", source="suggested"),
]


@pytest.mark.parametrize(
    ("mode", "rules", "own", "behavior", "reason"),
    [
        (DEFAULT, [rule(ASK, "/work")], OWN_PASS, ASK, "Rule: /work"),
        (ACCEPT_EDITS, [rule(ASK, "/work")], OWN_PASS, ASK, "Rule: /work"),
        (EXPLORE, [rule(ASK, "/work")], OWN_PASS, ASK, "Rule: /work"),
        (BYPASS, [rule(ASK, "/work")], OWN_PASS, ASK, "Rule: /work"),
        (DONT_ASK, [rule(ASK, "/work")], OWN_PASS, DENY, converted_reason("Rule: /work")),
        (DEFAULT, [], OWN_PASS, ASK, "Mode: default"),
        (ACCEPT_EDITS, [], PLAIN_ASK, ASK, "Mode: accept_edits"),
        (DEFAULT, [rule(ALLOW)], SAFETY_ASK, ASK, "dangerous path"),
        (ACCEPT_EDITS, [rule(ALLOW)], SAFETY_ASK, ASK, "dangerous path"),
        (DONT_ASK, [rule(ALLOW)], SAFETY_ASK, DENY, converted_reason("dangerous path")),
    ],
)
async def test_custom_suggestions_are_attached_unchanged(mode, rules, own, behavior, reason):
    tool = Probe(own=own, suggestions=CUSTOM)
    decision = await make_engine(mode, *rules).check_permission(tool, WRITE)
    assert (decision.behavior, decision.decision_reason) == (behavior, reason)
    assert decision.suggested_rules == CUSTOM
    assert [p for h, p in tool.calls if h == "generate_suggestions"] == [WRITE]


@pytest.mark.parametrize(
    ("mode", "rules", "own", "read_only"),
    [
        (DEFAULT, [rule(DENY)], OWN_PASS, False),
        (DEFAULT, [rule(ALLOW)], OWN_PASS, False),
        (DEFAULT, [], OWN_PASS, True),
        (DEFAULT, [], OWN_ALLOW, False),
        (DEFAULT, [], OWN_DENY, False),
        (EXPLORE, [], OWN_PASS, False),
        (BYPASS, [], SAFETY_ASK, False),
        (DONT_ASK, [], OWN_PASS, False),
        (DONT_ASK, [rule(DENY)], OWN_PASS, False),
    ],
)
async def test_no_suggestions_without_an_ask(mode, rules, own, read_only):
    tool = Probe(own=own, read_only=read_only, suggestions=CUSTOM)
    decision = await make_engine(mode, *rules).check_permission(tool, WRITE)
    assert decision.behavior != ASK
    assert decision.suggested_rules is None
    assert "generate_suggestions" not in tool.hooks()


async def test_dont_ask_deny_rule_is_reported_as_a_rule_denial():
    # dont_ask step D is the same D as every other mode.
    tool = Probe()
    decision = await make_engine(DONT_ASK, rule(DENY, "/work")).check_permission(tool, WRITE)
    assert summary(decision) == (DENY, DENIED_BY_RULE, "Rule: /work", None, None)
    assert tool.hooks() == ["match_rule"]


async def test_each_ask_gets_a_fresh_suggestion_list():
    permission_engine = make_engine(DEFAULT)
    first = await permission_engine.check_permission(Probe(), WRITE)
    assert first.suggested_rules is not None
    first.suggested_rules.append(rule(DENY))
    second = await permission_engine.check_permission(Probe(), WRITE)
    assert second.suggested_rules == DEFAULT_SUGGESTION


# -- updated_input ---------------------------------------------------------------------------------------
# updated_input defaults to None and is set only by allow-rule decisions (step L: ALLOW
# 'Permission granted for <t>', updated_input=input). When set it is the input the tool runs
# with, so only the allow-rule ALLOW may carry it — and it must be the caller's input unchanged.


@pytest.mark.parametrize("mode", [DEFAULT, ACCEPT_EDITS, BYPASS, DONT_ASK])
async def test_only_allow_rule_decisions_carry_updated_input(mode):
    tool_input = {"path": "/work/src/a.py", "opts": {"force": True, "tags": ["x"]}}
    decision = await make_engine(mode, rule(ALLOW, "/work")).check_permission(Probe(), tool_input)
    assert summary(decision) == (ALLOW, GRANTED, None, tool_input, None)
    for rules, read_only in (([], True), ([rule(DENY)], False), ([rule(ASK)], False), ([], False)):
        tool = Probe(read_only=read_only)
        decision = await make_engine(mode, *rules).check_permission(tool, tool_input)
        assert decision.updated_input is None


@pytest.mark.parametrize("mode", ALL_MODES)
async def test_the_engine_never_mutates_the_callers_input(mode):
    tool_input = {"op": "write", "path": "/work/a", "nested": {"list": [1, {"k": "v"}]}}
    snapshot = copy.deepcopy(tool_input)
    scenarios = [
        [],
        [rule(ALLOW)],
        [rule(ALLOW, "/work")],
        [rule(ASK, "/work")],
        [rule(DENY, "/work")],
    ]
    for rules in scenarios:
        for own in OWN.values():
            await make_engine(mode, *rules).check_permission(Probe(own=own), tool_input)
            assert tool_input == snapshot


# -- add_rule and the live context -------------------------------------------------------------------
# add_rule(rule) appends to the per-tool list matching rule.behavior (allow/deny/ask;
# passthrough ignored); rules added on confirmation persist in state.permission_context.


async def test_rules_added_later_or_directly_to_the_context_take_effect():
    context = PermissionContext()
    permission_engine = PermissionEngine(context)
    assert (await permission_engine.check_permission(Probe(), WRITE)).behavior == ASK
    permission_engine.add_rule(rule(ALLOW, "/work"))
    assert (await permission_engine.check_permission(Probe(), WRITE)).behavior == ALLOW
    context.deny_rules["probe"] = [rule(DENY, "/work/src")]
    decision = await permission_engine.check_permission(Probe(), WRITE)
    assert (decision.behavior, decision.decision_reason) == (DENY, "Rule: /work/src")


def test_add_rule_files_rules_by_tool_and_behaviour_in_order():
    permission_engine = PermissionEngine()
    added = [
        rule(ALLOW, "a", tool="Bash"),
        rule(DENY, "b", tool="Bash"),
        rule(ALLOW, "c", tool="Read"),
        rule(ASK, "d", tool="Bash"),
        rule(ALLOW, "e", tool="Bash"),
        rule(PASSTHROUGH, "f", tool="Bash"),
        rule("deny", "g", tool="Read"),
    ]
    for r in added:
        permission_engine.add_rule(r)
    context = permission_engine.context
    assert context.allow_rules == {"Bash": [added[0], added[4]], "Read": [added[2]]}
    assert context.deny_rules == {"Bash": [added[1]], "Read": [added[6]]}
    assert context.ask_rules == {"Bash": [added[3]]}
    # Adding the same rule twice keeps both entries (a plain append).
    permission_engine.add_rule(added[3])
    assert context.ask_rules == {"Bash": [added[3], added[3]]}


# -- malformed rules, decisions and contexts ---------------------------------------------------------------
# The data shapes of rules, decisions and contexts; a bad value must fail at construction or
# loading with a typed error, never later inside a check.


def test_malformed_rules_are_rejected_with_typed_errors():
    with pytest.raises(ValueError, match="'maybe' is not a valid PermissionBehavior"):
        PermissionRule(tool_name="probe", behavior="maybe")
    with pytest.raises(ValueError, match="'ALLOW' is not a valid PermissionBehavior"):
        PermissionRule(tool_name="probe", behavior="ALLOW")
    with pytest.raises(ValueError, match="None is not a valid PermissionBehavior"):
        PermissionRule(tool_name="probe", behavior=None)
    with pytest.raises(TypeError, match="behavior"):
        PermissionRule(tool_name="probe")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        PermissionRule("probe", None, "allow")  # type: ignore[misc]
    frozen = rule(ALLOW)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        frozen.rule_content = "x"  # type: ignore[misc]
    assert frozen == rule("allow")
    assert hash(frozen) == hash(rule("allow"))
    with pytest.raises(ValueError, match="'plan' is not a valid PermissionMode"):
        PermissionContext(mode="plan")
    with pytest.raises(ValueError, match="'permit' is not a valid PermissionBehavior"):
        PermissionDecision("permit", "m")


@pytest.mark.parametrize(
    ("payload", "path"),
    [
        ('{"mode": "plan"}', "$.mode"),
        ('{"mode": "DEFAULT"}', "$.mode"),
        ('{"mode": null}', "$.mode"),
        (
            '{"allow_rules": {"x": [{"tool_name": "x", "behavior": "maybe"}]}}',
            "$.allow_rules['x'][0].behavior",
        ),
        ('{"deny_rules": {"x": [{"behavior": "deny"}]}}', "$.deny_rules['x'][0].tool_name"),
        (
            '{"ask_rules": {"x": [{"tool_name": "x", "rule_content": 5, "behavior": "ask"}]}}',
            "$.ask_rules['x'][0].rule_content",
        ),
        ('{"allow_rules": []}', "$.allow_rules"),
        ('{"working_directories": {"/a": {"source": "s"}}}', "$.working_directories['/a'].path"),
        ('{"bogus": 1}', "$"),
        ("[]", "$"),
        ("not json", "$"),
    ],
)
def test_malformed_contexts_fail_to_load_with_the_bad_path(payload, path):
    with pytest.raises(SerializationError) as info:
        loads(payload, PermissionContext)
    assert isinstance(info.value, ValueError)
    assert any(error.endswith(f"@ {path}") for error in info.value.errors)


# -- serialization round trip ---------------------------------------------------------------------------
# PermissionContext lives in AgentState.permission_context and is persisted with the state.


def full_context(mode: PermissionMode) -> PermissionContext:
    context = PermissionContext(
        mode=mode,
        working_directories={
            "/srv/proj": AdditionalWorkingDirectory(path="/srv/proj", source="userSettings"),
            "/tmp/ü": AdditionalWorkingDirectory(path="/tmp/ü", source="session"),
        },
    )
    permission_engine = PermissionEngine(context)
    for r in [
        rule(ALLOW, None, source="suggested"),
        rule(ALLOW, "", source="session"),
        rule(ALLOW, "/work/src", source="userSettings"),
        rule(DENY, "/etc", tool="Bash", source="projectSettings"),
        rule(DENY, "/work/secret"),
        rule(ASK, "git push:*", tool="Bash"),
        rule(ASK, "/work"),
    ]:
        permission_engine.add_rule(r)
    return context


@pytest.mark.parametrize("mode", ALL_MODES)
async def test_context_round_trip_preserves_everything_and_every_decision(mode):
    context = full_context(mode)
    again = loads(dumps(context), PermissionContext)
    assert again == context
    assert again.mode is mode
    # None and "" stay distinct, rule order is kept, nested types are rebuilt.
    assert [r.rule_content for r in again.allow_rules["probe"]] == [None, "", "/work/src"]
    assert [r.source for r in again.allow_rules["probe"]] == [
        "suggested",
        "session",
        "userSettings",
    ]
    assert all(type(r) is PermissionRule for rules in again.deny_rules.values() for r in rules)
    assert all(r.behavior is DENY for rules in again.deny_rules.values() for r in rules)
    assert type(again.working_directories["/tmp/ü"]) is AdditionalWorkingDirectory
    # The reloaded context decides exactly as the original one.
    inputs = [WRITE, READ, {"path": "/work/secret/k"}, {"path": "/etc/passwd"}, {"path": "/x"}]
    for tool_input in inputs:
        for own in OWN.values():
            original = await PermissionEngine(context).check_permission(Probe(own=own), tool_input)
            reloaded = await PermissionEngine(again).check_permission(Probe(own=own), tool_input)
            assert summary(original) == summary(reloaded)


def test_context_json_shape():
    context = PermissionContext(mode=DONT_ASK)
    PermissionEngine(context).add_rule(rule(ASK, "git:*", tool="Bash", source="userSettings"))
    assert dumps(context) == (
        '{"mode":"dont_ask","working_directories":{},"allow_rules":{},"deny_rules":{},'
        '"ask_rules":{"Bash":[{"tool_name":"Bash","rule_content":"git:*","behavior":"ask",'
        '"source":"userSettings"}]}}'
    )


def test_permission_context_round_trips_inside_the_agent_state():
    state = AgentState(permission_context=full_context(ACCEPT_EDITS))
    again = loads(dumps(state), AgentState)
    assert again.permission_context == state.permission_context
    assert again.permission_context.mode is ACCEPT_EDITS
    # The reloaded rules are a fresh copy: adding to one context leaves the other alone.
    PermissionEngine(again.permission_context).add_rule(rule(DENY, "/new"))
    assert again.permission_context != state.permission_context


async def test_a_tool_suggesting_none_gets_an_ask_without_suggestions() -> None:
    """The suggestions are attached as the tool returns them; ``None`` is no crash."""

    class NoSuggestions(ToolBase):
        name = "t"

        async def generate_suggestions(self, tool_input: dict[str, Any]) -> Any:
            return None

    decision = await PermissionEngine().check_permission(NoSuggestions(), {})
    assert decision.behavior == PermissionBehavior.ASK
    assert decision.suggested_rules is None


def test_add_rule_refuses_what_could_never_match() -> None:
    engine = PermissionEngine()
    with pytest.raises(TypeError, match="add_rule takes a PermissionRule, got dict"):
        engine.add_rule({"tool_name": "t", "behavior": "allow"})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="tool_name must be a non-empty str, got 5"):
        engine.add_rule(PermissionRule(tool_name=5, behavior="allow"))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="rule_content must be a str or None"):
        engine.add_rule(PermissionRule(tool_name="t", rule_content=3, behavior="deny"))  # type: ignore[arg-type]
    assert engine.context.allow_rules == engine.context.deny_rules == {}
