"""Skills in the toolkit, as in AgentScope 2.0.11: per-group skills, the ``Skill`` viewer
(listed first, only while a visible group has skills), the skill listing in the system prompt
of the agent, and reading a skill through the viewer."""

from __future__ import annotations

import pathlib

import pytest
from agent_kit import call, calls, make_agent, model_of, result_of, run, text, user

from trioagent.agent import Agent, AgentState
from trioagent.message import ToolCallBlock
from trioagent.permission import PermissionBehavior
from trioagent.skill import LocalSkillLoader, Skill, SkillLoaderBase
from trioagent.testing import cancel_sweep
from trioagent.tool import SkillViewer, ToolGroup, Toolkit

ALPHA = Skill(name="alpha", description="Does A", dir="/skills/alpha", markdown="# Alpha steps")
BETA = Skill(name="beta", description="Does B", dir="/skills/beta", markdown="# Beta steps")


def names(kit: Toolkit, groups: list[str] | None = None) -> list[str]:
    return [s["function"]["name"] for s in kit.get_tool_schemas(groups)]


def test_viewer_is_listed_first_while_a_visible_group_has_skills() -> None:
    kit = Toolkit(tool_groups=[ToolGroup("extra", description="More", skills_or_loaders=[BETA])])
    assert names(kit) == ["reset_tools"]
    assert names(kit, ["extra"]) == ["Skill", "reset_tools"]
    assert names(Toolkit(skills_or_loaders=[ALPHA])) == ["Skill"]
    assert names(Toolkit()) == []


def test_skill_sources_are_normalized_and_checked(tmp_path: pathlib.Path) -> None:
    group = ToolGroup("g", description="d", skills_or_loaders=[str(tmp_path), ALPHA])
    loader, skill = group.skills_or_loaders
    assert isinstance(loader, LocalSkillLoader)
    assert loader.directory == str(tmp_path)
    assert skill is ALPHA
    with pytest.raises(TypeError, match="Invalid skill or loader: 42"):
        ToolGroup("g", description="d", skills_or_loaders=[42])  # type: ignore[list-item]


async def test_skills_per_group_and_duplicates(caplog: pytest.LogCaptureFixture) -> None:
    shadow = Skill(name="alpha", description="Other A", dir="/x", markdown="# other")
    kit = Toolkit(
        skills_or_loaders=[ALPHA],
        tool_groups=[ToolGroup("extra", description="More", skills_or_loaders=[BETA, shadow])],
    )
    assert list(await kit.list_skills()) == ["alpha"]
    both = await kit.list_skills(["extra"])
    assert list(both) == ["alpha", "beta"]
    assert both["alpha"] is shadow
    assert "Duplicate skill name 'alpha' found in group 'extra'" in caplog.text


async def test_skill_instructions_render_the_visible_skills() -> None:
    kit = Toolkit(
        skills_or_loaders=[ALPHA],
        tool_groups=[ToolGroup("extra", description="More", skills_or_loaders=[BETA])],
    )
    basic_only = await kit.get_skill_instructions([])
    assert basic_only is not None
    assert "<name>alpha</name>" in basic_only
    assert "beta" not in basic_only
    every = await kit.get_skill_instructions()
    assert every is not None
    assert every.startswith("<agent-skills>\nSkills are a collection of instructions")
    assert "you MUST use the `Skill` tool to read the skill's full instructions" in every
    assert (
        "<skill>\n<name>beta</name>\n<description>Does B</description>\n<dir>/skills/beta</dir>"
        "\n</skill>"
    ) in every
    assert await Toolkit().get_skill_instructions() is None
    custom = Toolkit(
        skills_or_loaders=[ALPHA],
        skill_instructions=lambda skills, viewer: f"{viewer}: {[s.name for s in skills]}",
    )
    assert await custom.get_skill_instructions() == "Skill: ['alpha']"


async def test_add_skills_to_a_group() -> None:
    kit = Toolkit(tool_groups=[ToolGroup("extra", description="More")])
    kit.add_skills([BETA], "extra")
    assert list(await kit.list_skills(["extra"])) == ["beta"]
    with pytest.raises(ValueError, match="Cannot find group 'nope'"):
        kit.add_skills([BETA], "nope")


async def test_viewer_reads_a_visible_skill_and_reports_an_unknown_one() -> None:
    kit = Toolkit(tool_groups=[ToolGroup("extra", description="More", skills_or_loaders=[BETA])])
    state = AgentState()
    state.tool_context.activated_groups = ["extra"]
    found = await kit.call_tool(
        ToolCallBlock(id="1", name="Skill", input='{"skill": "beta"}'), state=state
    )
    assert found.text() == "# Beta steps"
    unknown = await kit.call_tool(
        ToolCallBlock(id="2", name="Skill", input='{"skill": "gamma"}'), state=state
    )
    assert unknown.state == "error"
    assert unknown.text() == "SkillNotFoundError: Skill 'gamma' not found."
    state.tool_context.activated_groups = []
    hidden = await kit.call_tool(
        ToolCallBlock(id="3", name="Skill", input='{"skill": "beta"}'), state=state
    )
    assert hidden.text().startswith(
        "ToolGroupInactiveError: The tool 'Skill' in group 'extra' is currently inactive."
    )
    basic = Toolkit(
        skills_or_loaders=[ALPHA],
        tool_groups=[ToolGroup("extra", description="d", skills_or_loaders=[BETA])],
    )
    not_visible = await basic.call_tool(
        ToolCallBlock(id="4", name="Skill", input='{"skill": "beta"}'), state=AgentState()
    )
    assert not_visible.text() == "SkillNotFoundError: Skill 'beta' not found."


async def test_viewer_is_always_allowed_and_read_only() -> None:
    viewer = Toolkit(skills_or_loaders=[ALPHA]).skill_viewer
    assert isinstance(viewer, SkillViewer)
    decision = await viewer.check_permissions({"skill": "alpha"}, AgentState().permission_context)
    assert decision.behavior == PermissionBehavior.ALLOW
    assert await viewer.check_read_only({}) is True


class CountingLoader(SkillLoaderBase):
    def __init__(self) -> None:
        self.calls = 0

    async def list_skills(self) -> list[Skill]:
        self.calls += 1
        return [ALPHA]


async def test_agent_lists_skills_in_its_system_prompt_and_reads_one(
    tmp_path: pathlib.Path,
) -> None:
    skill_dir = tmp_path / "beta"
    skill_dir.mkdir()
    (skill_dir / "SKILL.md").write_text("---\nname: beta\ndescription: Does B\n---\n# Beta steps\n")
    loader = CountingLoader()
    kit = Toolkit(
        skills_or_loaders=[loader],
        tool_groups=[
            ToolGroup("extra", description="More", skills_or_loaders=[str(tmp_path / "beta")])
        ],
    )
    agent = make_agent(
        [calls(call("v1", "Skill", skill="alpha")), text("done")], kit, system_prompt="Be brief."
    )
    msg, _ = await run(agent, user())
    assert msg.get_text_content() == "done"
    assert result_of(agent, "v1").output_text() == "# Alpha steps"
    requests = model_of(agent).requests
    system = requests[0].messages[0]
    assert system.role == "system"
    prompt = system.get_text_content() or ""
    assert prompt.startswith("Be brief.\n<agent-skills>")
    assert "<name>alpha</name>" in prompt
    assert "beta" not in prompt  # "extra" is not active
    assert [t["function"]["name"] for t in requests[0].tools or []][:2] == ["Skill", "reset_tools"]
    assert loader.calls >= 2  # listed again at every step: new skills show up


async def test_activating_a_group_shows_its_skills(tmp_path: pathlib.Path) -> None:
    kit = Toolkit(tool_groups=[ToolGroup("extra", description="More", skills_or_loaders=[BETA])])
    agent = make_agent([calls(call("r1", "reset_tools", extra=True)), text("ok")], kit)
    await run(agent, user())
    first, second = (r.messages[0] for r in model_of(agent).requests)
    assert "agent-skills" not in (first.get_text_content() or "")
    assert "<name>beta</name>" in (second.get_text_content() or "")


@pytest.mark.parametrize("mode", ["interrupt", "outer"])
async def test_sweep_a_reply_that_lists_and_reads_a_local_skill(
    mode: str, tmp_path: pathlib.Path
) -> None:
    skill_dir = tmp_path / "beta"
    skill_dir.mkdir()
    (skill_dir / "SKILL.md").write_text("---\nname: beta\ndescription: Does B\n---\n# Beta steps\n")

    def make() -> Agent:
        kit = Toolkit(skills_or_loaders=[LocalSkillLoader(str(tmp_path), scan_subdir=True)])
        return make_agent([calls(call("v1", "Skill", skill="beta")), text("done")], kit)

    report = await cancel_sweep(make, user, mode=mode)
    assert report.runs[0].end is not None
    assert report.runs[0].end.finished_reason == "completed"
    assert report.outcomes["interrupted"] > 0
