"""``Write`` and ``Edit`` as in AgentScope 2.0.11: the read-before-edit rule (the file must be
in the state's read cache, unchanged since), exact replacements, diffs in the metadata, and
bad input as error results."""

from __future__ import annotations

import os
import pathlib

import pytest
from agent_kit import call, calls, make_agent, text, user

from trioagent.agent import Agent, AgentState
from trioagent.permission import PermissionMode
from trioagent.testing import SweepRun, cancel_sweep
from trioagent.tool import Edit, Read, Toolkit, Write


async def read_into(state: AgentState, path: pathlib.Path) -> None:
    await Read().run({"file_path": str(path), "_agent_state": state})


async def test_write_creates_a_new_file_with_its_directories(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "new" / "dir" / "f.txt"
    state = AgentState()
    response = await Write().run(
        {"file_path": str(path), "content": "a\nb\n", "_agent_state": state}
    )
    assert response.state == "success"
    assert response.text() == f"The file {path} has been written successfully (2 lines)."
    assert path.read_text() == "a\nb\n"
    assert response.metadata["diff"].startswith(f"--- /dev/null\n+++ b/{path}")  # type: ignore[union-attr]
    assert response.metadata["occurrences"] == 1
    # The written content is cached: an edit right after needs no read.
    edited = await Edit().run(
        {"file_path": str(path), "old_string": "b", "new_string": "c", "_agent_state": state}
    )
    assert edited.state == "success"


async def test_an_existing_file_must_be_read_before_writing(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "f.txt"
    path.write_text("old\n")
    state = AgentState()
    refused = await Write().run({"file_path": str(path), "content": "new", "_agent_state": state})
    assert refused.state == "error"
    assert refused.text() == (
        f"Error: File {path} exists but has not been read yet. You must read the file first "
        "before writing to it."
    )
    assert path.read_text() == "old\n"
    await read_into(state, path)
    done = await Write().run({"file_path": str(path), "content": "new\n", "_agent_state": state})
    assert done.state == "success"
    assert "-old\n+new\n" in done.metadata["diff"]  # type: ignore[operator]


async def test_edit_requires_a_fresh_read(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "f.txt"
    path.write_text("alpha beta\n")
    state = AgentState()
    args = {
        "file_path": str(path),
        "old_string": "beta",
        "new_string": "gamma",
        "_agent_state": state,
    }
    not_read = await Edit().run(args)
    assert not_read.text() == "Error: To edit a file, you must first read it using the Read tool."
    await read_into(state, path)
    path.write_text("alpha beta changed\n")
    stat = path.stat()
    os.utime(path, (stat.st_atime, stat.st_mtime + 5))
    stale = await Edit().run(args)
    assert stale.text() == "Error: To edit a file, you must first read it using the Read tool."
    await read_into(state, path)
    done = await Edit().run(args)
    assert done.text() == f"Successfully replaced 1 occurrence in {path}"
    assert path.read_text() == "alpha gamma changed\n"
    assert done.metadata["file_path"] == str(path)


async def test_edit_occurrences_and_replace_all(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "f.txt"
    path.write_text("x x x\n")
    ambiguous = await Edit().run({"file_path": str(path), "old_string": "x", "new_string": "y"})
    assert ambiguous.text() == (
        f"Error: old_string appears 3 times in {path}. Set replace_all=true to replace all "
        "occurrences, or make old_string more specific."
    )
    done = await Edit().run(
        {"file_path": str(path), "old_string": "x", "new_string": "y", "replace_all": True}
    )
    assert done.text() == f"Successfully replaced all 3 occurrences in {path}"
    assert done.metadata["occurrences"] == 3
    assert path.read_text() == "y y y\n"
    missing = await Edit().run({"file_path": str(path), "old_string": "zzz", "new_string": "q"})
    assert missing.text() == f"Error: old_string not found in {path}"


async def test_edit_bad_input(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "f.txt"
    path.write_text("x")

    async def text(**kwargs: object) -> str:
        response = await Edit().run(kwargs)  # type: ignore[arg-type]
        assert response.state == "error"
        return response.text()

    assert await text(file_path=str(path), old_string="", new_string="y") == (
        "Error: old_string must not be empty. Use the Write tool to populate an empty file."
    )
    assert await text(file_path="f.txt", old_string="x", new_string="y") == (
        "Error: file_path must be an absolute path, got: f.txt"
    )
    assert await text(file_path=str(tmp_path / "no"), old_string="x", new_string="y") == (
        f"Error: File not found: {tmp_path / 'no'}"
    )
    assert await text(file_path=str(path), old_string="x", new_string="x") == (
        "Error: old_string and new_string are identical. No changes to make."
    )
    binary = tmp_path / "b.bin"
    binary.write_bytes(b"\xff\xfe\x00")
    assert await text(file_path=str(binary), old_string="x", new_string="y") == (
        f"Error: {binary} is not a UTF-8 text file."
    )


async def test_write_bad_input(tmp_path: pathlib.Path) -> None:
    relative = await Write().run({"file_path": "f.txt", "content": "x"})
    assert relative.text() == "Error: file_path must be an absolute path, got: f.txt"
    blocked = tmp_path / "file"
    blocked.write_text("")
    under_a_file = await Write().run({"file_path": str(blocked / "x.txt"), "content": "x"})
    assert under_a_file.state == "error"
    assert under_a_file.text().startswith("Error writing file: ")


async def test_crlf_files_are_edited_with_lf_strings(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "f.txt"
    path.write_bytes(b"a\r\nb\r\n")
    done = await Edit().run({"file_path": str(path), "old_string": "a\nb", "new_string": "c"})
    assert done.state == "success"
    assert path.read_bytes() == b"c\n"


@pytest.mark.parametrize("mode", ["interrupt", "outer"])
async def test_sweep_a_reply_that_reads_then_edits_a_file(
    mode: str, tmp_path: pathlib.Path
) -> None:
    """Cancelled at every point of Read → Edit → answer: one end, every call one result, and
    the file is either untouched or edited whole (the write runs in a worker thread)."""
    target = tmp_path / "notes.txt"
    original, edited = "alpha\nbeta\n", "alpha\ngamma\n"

    def make() -> Agent:
        target.write_text(original)
        state = AgentState()
        state.permission_context.mode = PermissionMode.BYPASS
        steps = [
            calls(call("r1", "Read", file_path=str(target))),
            calls(call("e1", "Edit", file_path=str(target), old_string="beta", new_string="gamma")),
            text("edited"),
        ]
        return make_agent(steps, Toolkit([Read(), Edit()]), state=state)

    seen: set[str] = set()

    def check(run: SweepRun) -> None:
        content = target.read_text()
        assert content in (original, edited)
        seen.add(content)

    report = await cancel_sweep(make, user, mode=mode, check=check)
    assert report.runs[0].end is not None
    assert report.runs[0].end.finished_reason == "completed"
    assert seen == {original, edited}  # cancelled both before and after the write
    assert report.outcomes["interrupted"] > 0
