"""``Bash`` as in AgentScope 2.0.11: the command's output streamed as chunks, exit codes and
timeouts as error results, the whole process group killed on a timeout or a cancellation, the
read-only fast path, the Bash-specific permission checks, and rule matching and suggestions.

Real subprocesses on the real clock, with generous bounds.
"""

from __future__ import annotations

import os
import pathlib
import time

import pytest
import trio
from process_kit import alive, recorded_pids, tree_command

from trioagent.permission import (
    PermissionBehavior,
    PermissionContext,
    PermissionEngine,
    PermissionMode,
    PermissionRule,
)
from trioagent.tool import Bash, ToolChunk, ToolResponse


async def run(command: str, **kwargs: object) -> tuple[ToolResponse, list[ToolChunk]]:
    chunks: list[ToolChunk] = []

    async def emit(chunk: ToolChunk) -> None:
        chunks.append(chunk)

    response = await Bash(**kwargs).run({"command": command}, emit)  # type: ignore[arg-type]
    return response, chunks


async def test_output_is_streamed_as_it_comes() -> None:
    stamps: list[float] = []
    chunks: list[ToolChunk] = []

    async def emit(chunk: ToolChunk) -> None:
        stamps.append(time.monotonic())
        chunks.append(chunk)

    response = await Bash().run({"command": "echo one; sleep 0.5; echo two"}, emit)
    assert response.state == "success"
    assert response.text() == "one\ntwo\n"
    assert [c.content[0].text for c in chunks] == ["one\n", "two\n"]  # type: ignore[union-attr]
    assert stamps[1] - stamps[0] >= 0.4  # the first line arrived before the command ended
    assert all(c.is_last is False for c in chunks)


async def test_stderr_is_merged_and_a_failure_is_an_error_result() -> None:
    response, _ = await run("echo out; echo err >&2; exit 3")
    assert response.state == "error"
    assert response.text() == (
        "out\nerr\n\nCommand failed: echo out; echo err >&2; exit 3 (exited with code 3)"
    )


async def test_no_output_gives_an_empty_success() -> None:
    response, _ = await run("true")
    assert response.state == "success"
    assert response.text() == ""


async def test_killed_by_a_signal() -> None:
    response, _ = await run("kill -KILL $$")
    assert response.text() == "Command failed: kill -KILL $$ (was killed by signal 9)"


async def test_crlf_and_bad_utf8_are_normalized() -> None:
    response, _ = await run(r"printf 'a\r\nb\377\n'")
    assert response.text() == "a\nb\ufffd\n"


async def test_long_output_is_truncated() -> None:
    response, _ = await run("yes x | head -c 100000")
    assert len(response.text()) < 30100
    assert response.text().endswith("\n... (output truncated)")


async def test_timeout_kills_the_whole_group(tmp_path: pathlib.Path) -> None:
    pid_file = tmp_path / "pids"
    command = tree_command(pid_file, 30)
    start = time.monotonic()
    response = await Bash().run({"command": command, "timeout": 1000})
    assert time.monotonic() - start < 10
    assert response.state == "error"
    assert response.text() == f"Command timed out after 1000ms: {command}"
    pids = recorded_pids(pid_file)
    assert len(pids) == 2
    assert alive(pids) == []


async def test_timeout_is_clamped_to_the_maximum() -> None:
    bash = Bash()
    assert bash.input_schema["properties"]["timeout"]["maximum"] == 600000  # type: ignore[index]
    response = await bash.run({"command": "echo ok", "timeout": 10**9})
    assert response.text() == "ok\n"


async def test_cancelling_the_call_kills_child_and_grandchild(tmp_path: pathlib.Path) -> None:
    pid_file = tmp_path / "pids"
    with trio.move_on_after(1.5):
        await Bash().run({"command": tree_command(pid_file, 30)})
    pids = recorded_pids(pid_file)
    assert len(pids) == 2
    assert alive(pids) == []


async def test_a_background_grandchild_of_an_exited_shell_is_killed_on_cancel(
    tmp_path: pathlib.Path,
) -> None:
    """The shell exits at once; its background child keeps the pipe open (so the call keeps
    reading) until the cancellation kills it."""
    pid_file = tmp_path / "pids"
    with trio.move_on_after(1.5):
        await Bash().run({"command": f"sleep 30 & echo $! > {pid_file}"})
    pids = recorded_pids(pid_file)
    assert len(pids) == 1
    assert alive(pids) == []


async def test_a_grandchild_ignoring_sigterm_is_killed_after_the_grace(
    tmp_path: pathlib.Path,
) -> None:
    pid_file = tmp_path / "pids"
    command = (
        f"sh -c 'trap \"\" TERM; echo $$ > {pid_file}; sleep 30 & echo $! >> {pid_file}; wait'"
    )
    with trio.move_on_after(1.5):
        await Bash().run({"command": command})
    assert alive(recorded_pids(pid_file)) == []


async def test_cwd(tmp_path: pathlib.Path) -> None:
    response, _ = await run("pwd", cwd=tmp_path)
    assert response.text() == f"{os.path.realpath(tmp_path)}\n"


# -- permissions ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "read_only"),
    [
        ("ls -la", True),
        ("git status", True),
        ("git log --oneline | head -5", True),
        ("cat a.txt && wc -l b.txt", True),
        ("FOO=1 echo hi", True),
        ("echo hi > out.txt", False),
        ("ls $(rm -rf /)", False),
        ("ls `rm x`", False),
        ("find . -name x -delete", False),
        ("git grep -Ols foo", False),
        ("rm a.txt", False),
        ("npm install", False),
        ("", False),
    ],
)
async def test_read_only_detection(command: str, read_only: bool) -> None:
    assert await Bash().check_read_only({"command": command}) is read_only


async def decide(command: str, mode: str = "default", **context: object) -> object:
    engine = PermissionEngine(PermissionContext(mode=mode, **context))  # type: ignore[arg-type]
    return await engine.check_permission(Bash(), {"command": command})


@pytest.mark.parametrize(
    ("command", "message"),
    [
        ("ls $(whoami)", "Permission required: Command contains command_substitution which"),
        ("for f in *; do rm $f; done", "Permission required: Command contains for_statement"),
        ("rm -rf build", "Permission required: Command contains dangerous pattern: rm -rf"),
        ("dd if=/dev/zero of=x", "Permission required: Command contains dangerous pattern: dd"),
        ("cp x ~/.bashrc", "Permission required: Bash command operates on sensitive paths"),
        ("sed -i s/a/b/ .env", "Permission required: sed -i modifying dangerous file: .env"),
        ("rm /usr", "Dangerous removal operation detected: '/usr'"),
        ("rm ./*", "Dangerous removal operation detected: './*'"),
    ],
)
async def test_safety_asks_survive_allow_rules_and_bypass_ignores_them(
    command: str, message: str
) -> None:
    rules = {
        "Bash": [
            PermissionRule(
                tool_name="Bash",
                rule_content=None,
                behavior=PermissionBehavior.ALLOW,
                source="test",
            )
        ]
    }
    decision = await decide(command, allow_rules=rules)
    assert decision.behavior == PermissionBehavior.ASK  # type: ignore[attr-defined]
    assert decision.bypass_immune is True  # type: ignore[attr-defined]
    assert decision.message.startswith(message)  # type: ignore[attr-defined]
    assert (await decide(command, "bypass")).behavior == PermissionBehavior.ALLOW  # type: ignore[attr-defined]
    assert (await decide(command, "dont_ask")).behavior == PermissionBehavior.DENY  # type: ignore[attr-defined]


async def test_accept_edits_allows_filesystem_commands_inside_the_working_directories(
    tmp_path: pathlib.Path,
) -> None:
    work = {str(tmp_path): {"path": str(tmp_path)}}
    inside = f"mkdir {tmp_path}/new"
    outside = "cp /etc/hosts /var/x"
    for mode in ("accept_edits", "dont_ask"):
        decision = await decide(inside, mode, working_directories=work)
        assert decision.behavior == PermissionBehavior.ALLOW  # type: ignore[attr-defined]
        assert "all targets in working directory" in decision.message  # type: ignore[attr-defined]
    assert (await decide(inside, "default", working_directories=work)).behavior == "ask"  # type: ignore[attr-defined]
    assert (await decide(outside, "accept_edits")).behavior == "ask"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("rule", "command", "matches"),
    [
        ("git status:*", "git status", True),
        ("git status:*", "git status --short", True),
        ("git status:*", "git statusx", False),
        ("git *", "git", True),
        ("git *", "git add .", True),
        ("npm run *", "npm run build", True),
        ("npm run *", "npm install", False),
        ("echo \\*", "echo * now", True),
        ("echo \\*", "echo x", False),
        ("build", "make build now", True),
        ("a*.txt", "a1.txt", True),
        ("a*.txt", "b1.txt", False),
    ],
)
async def test_rule_matching(rule: str, command: str, matches: bool) -> None:
    assert await Bash().match_rule(rule, {"command": command}) is matches
    assert await Bash().match_rule(None, {"command": command}) is True


async def test_an_allow_rule_with_a_prefix_lets_the_command_run() -> None:
    rules = {
        "Bash": [
            PermissionRule(
                tool_name="Bash",
                rule_content="npm run:*",
                behavior=PermissionBehavior.ALLOW,
                source="user",
            )
        ]
    }
    assert (await decide("npm run build", allow_rules=rules)).behavior == "allow"  # type: ignore[attr-defined]
    assert (await decide("npm install", allow_rules=rules)).behavior == "ask"  # type: ignore[attr-defined]


async def test_suggestions_are_prefix_rules() -> None:
    suggestions = await Bash().generate_suggestions(
        {"command": "git add . && git commit -m x && ls -la && CI=1 npm test && FOO=1 make"}
    )
    assert [s.rule_content for s in suggestions] == ["git add:*", "git commit:*", "npm test:*"]
    assert all(s.behavior == "allow" and s.tool_name == "Bash" for s in suggestions)
    assert await Bash().generate_suggestions({"command": ""}) == []


def test_modes_are_known() -> None:
    assert {m.value for m in PermissionMode} >= {"default", "bypass"}
