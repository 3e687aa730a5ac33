"""The permission table of the built-in tools: every mode × every built-in tool × a path inside
the working directories, outside them, and a dangerous file, against AgentScope 2.0.11.

How the expected table was derived: by walking AgentScope 2.0.11's permission engine and each
tool's own hooks by hand for every cell, without running AgentScope.  The engine checks deny
rules, ask rules, then the read-only fast path (``check_read_only``), which allows a read-only
call in every mode before the tool is asked anything; explore mode denies whatever is not
read-only without consulting the tool; otherwise the tool's ``check_permissions`` speaks:
``Write``/``Edit`` give a safety ASK for a dangerous path and allow paths inside the working
directories in accept_edits and dont_ask modes; ``Bash`` allows read-only command lines, gives a
safety ASK for a dangerous path and allows file commands (``touch`` here) whose targets are all
inside the working directories in accept_edits and dont_ask modes; the task tools, the skill
viewer and ``AskUser`` always allow.  What the tool leaves open falls to the mode: default and
accept_edits ask, bypass allows (ignoring safety ASKs), dont_ask denies (turning every ASK into
a DENY).  No rules are configured, so only modes, tools and paths decide.
"""

from __future__ import annotations

import pathlib
from typing import Any

import pytest

from trioagent.permission import (
    AdditionalWorkingDirectory,
    PermissionContext,
    PermissionEngine,
    PermissionMode,
)
from trioagent.skill import Skill
from trioagent.tool import (
    AskUser,
    Bash,
    Edit,
    Glob,
    Grep,
    Read,
    TaskCreate,
    TaskGet,
    TaskList,
    TaskUpdate,
    ToolBase,
    Toolkit,
    Write,
)

MODES = ["default", "accept_edits", "explore", "bypass", "dont_ask"]
WHERE = ["inside", "outside", "dangerous"]
A, K, D = "allow", "ask", "deny"

#: tool → mode → (inside, outside, dangerous)
TABLE: dict[str, dict[str, tuple[str, str, str]]] = {
    "Read": dict.fromkeys(MODES, (A, A, A)),
    "Glob": dict.fromkeys(MODES, (A, A, A)),
    "Grep": dict.fromkeys(MODES, (A, A, A)),
    "AskUser": dict.fromkeys(MODES, (A, A, A)),
    "Skill": dict.fromkeys(MODES, (A, A, A)),
    "Bash(cat)": dict.fromkeys(MODES, (A, A, A)),
    "Write": {
        "default": (K, K, K),
        "accept_edits": (A, K, K),
        "explore": (D, D, D),
        "bypass": (A, A, A),
        "dont_ask": (A, D, D),
    },
    "Bash(touch)": {
        "default": (K, K, K),
        "accept_edits": (A, K, K),
        "explore": (D, D, D),
        "bypass": (A, A, A),
        "dont_ask": (A, D, D),
    },
    **{
        name: {m: (D, D, D) if m == "explore" else (A, A, A) for m in MODES}
        for name in ("TaskCreate", "TaskGet", "TaskList", "TaskUpdate")
    },
}
TABLE["Edit"] = TABLE["Write"]


def tools() -> dict[str, ToolBase]:
    viewer = Toolkit(skills_or_loaders=[Skill(name="s", description="d", dir="/", markdown="")])
    bash = Bash()
    return {
        "Read": Read(),
        "Write": Write(),
        "Edit": Edit(),
        "Glob": Glob(),
        "Grep": Grep(use_ripgrep=False),
        "AskUser": AskUser(),
        "Skill": viewer.skill_viewer,
        "Bash(cat)": bash,
        "Bash(touch)": bash,
        "TaskCreate": TaskCreate(),
        "TaskGet": TaskGet(),
        "TaskList": TaskList(),
        "TaskUpdate": TaskUpdate(),
    }


def tool_input(name: str, path: pathlib.Path) -> dict[str, Any]:
    if name in ("Read", "Write", "Edit"):
        return {"file_path": str(path), "content": "x", "old_string": "a", "new_string": "b"}
    if name in ("Glob", "Grep"):
        return {"pattern": "*", "path": str(path.parent)}
    if name.startswith("Bash"):
        verb = name[5:-1]
        return {"command": f"{verb} {path}"}
    if name == "Skill":
        return {"skill": "s"}
    if name == "AskUser":
        return {"questions": []}
    return {"task_id": "1", "subject": "s", "description": str(path)}


@pytest.fixture
def places(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, pathlib.Path]:
    cwd, work, elsewhere = tmp_path / "cwd", tmp_path / "work", tmp_path / "elsewhere"
    for directory in (cwd, work, elsewhere):
        directory.mkdir()
    (work / ".git").mkdir()
    monkeypatch.chdir(cwd)
    return {
        "inside": work / "src" / "main.py",
        "outside": elsewhere / "main.py",
        "dangerous": work / ".env",
        "dangerous-dir": work / ".git" / "config",
        "cwd": cwd / "main.py",
        "work": work,
    }


def context(mode: str, places: dict[str, pathlib.Path]) -> PermissionContext:
    work = str(places["work"])
    return PermissionContext(
        mode=PermissionMode(mode),
        working_directories={work: AdditionalWorkingDirectory(path=work)},
    )


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", sorted(TABLE))
async def test_permission_table(name: str, mode: str, places: dict[str, pathlib.Path]) -> None:
    tool = tools()[name]
    engine = PermissionEngine(context(mode, places))
    got: tuple[str, ...] = ()
    for where in WHERE:
        decision = await engine.check_permission(tool, tool_input(name, places[where]))
        got += (str(decision.behavior),)
    assert got == TABLE[name][mode], f"{name} in {mode} mode (inside, outside, dangerous)"


@pytest.mark.parametrize("name", ["Write", "Edit", "Bash(touch)"])
async def test_a_dangerous_directory_and_the_cwd(
    name: str, places: dict[str, pathlib.Path]
) -> None:
    """A file inside ``.git`` is as dangerous as ``.env``; the cwd counts as a working
    directory."""
    tool = tools()[name]
    accept = PermissionEngine(context("accept_edits", places))
    in_git = await accept.check_permission(tool, tool_input(name, places["dangerous-dir"]))
    assert str(in_git.behavior) == K
    assert in_git.bypass_immune is True
    in_cwd = await accept.check_permission(tool, tool_input(name, places["cwd"]))
    assert str(in_cwd.behavior) == A


async def test_the_safety_ask_says_why(places: dict[str, pathlib.Path]) -> None:
    engine = PermissionEngine(context("default", places))
    write = await engine.check_permission(Write(), tool_input("Write", places["dangerous"]))
    assert (
        write.message
        == f"Permission required: Write operation on sensitive file {places['dangerous']}"
    )
    assert write.decision_reason == "Safety check: dangerous file or directory"
    edit = await engine.check_permission(Edit(), tool_input("Edit", places["inside"]))
    assert edit.message == "Permission required for Edit"
    assert edit.decision_reason == "Mode: default"
    assert [r.rule_content for r in edit.suggested_rules or []] == [f"{places['inside'].parent}/**"]
    dont_ask = PermissionEngine(context("dont_ask", places))
    denied = await dont_ask.check_permission(Write(), tool_input("Write", places["dangerous"]))
    assert denied.decision_reason == (
        "DONT_ASK mode converted ASK to DENY. Original reason: Safety check: dangerous file or "
        "directory"
    )


async def test_dangerous_lists_can_be_replaced(places: dict[str, pathlib.Path]) -> None:
    engine = PermissionEngine(context("accept_edits", places))
    relaxed = Write(dangerous_files=[], dangerous_directories=[])
    decision = await engine.check_permission(relaxed, tool_input("Write", places["dangerous"]))
    assert str(decision.behavior) == A
