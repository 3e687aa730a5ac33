"""``Read`` as in AgentScope 2.0.11: numbered lines with offset and limit, long lines cut,
images as data blocks, the read cache in the agent state, and bad input as error results."""

from __future__ import annotations

import base64
import pathlib

import pytest

from trioagent.agent import AgentState
from trioagent.message import DataBlock
from trioagent.permission import PermissionBehavior, PermissionContext, PermissionEngine
from trioagent.tool import Read


async def read(**kwargs: object) -> tuple[str, str]:
    response = await Read().run(kwargs)  # type: ignore[arg-type]
    return str(response.state), response.text()


async def test_numbered_lines_offset_and_limit(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "f.txt"
    path.write_bytes(b"one\r\ntwo\nthree\n")
    assert await read(file_path=str(path)) == ("success", "     1\tone\n     2\ttwo\n     3\tthree")
    assert await read(file_path=str(path), offset=2, limit=1) == ("success", "     2\ttwo")


async def test_long_lines_are_cut(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "f.txt"
    path.write_text("x" * 50)
    response = await Read(max_line_characters=10).run({"file_path": str(path)})
    assert response.text() == "     1\t" + "x" * 10 + "[truncated]"


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("missing.txt", "Error: File does not exist: {p}"),
        ("", "Error: Path is a directory, not a file: {p}"),
    ],
)
async def test_missing_file_and_directory(tmp_path: pathlib.Path, name: str, message: str) -> None:
    path = str(tmp_path / name) if name else str(tmp_path)
    assert await read(file_path=path) == ("error", message.format(p=path))


async def test_relative_path_and_binary_file(tmp_path: pathlib.Path) -> None:
    assert await read(file_path="rel.txt") == (
        "error",
        "Error: file_path must be an absolute path, got: rel.txt",
    )
    binary = tmp_path / "blob.bin"
    binary.write_bytes(b"\x00\x01\x02data")
    assert await read(file_path=str(binary)) == (
        "error",
        f"Error: {binary} is a binary file; only text files and images can be read.",
    )


async def test_unreadable_file(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "secret.txt"
    path.write_text("x")
    path.chmod(0)
    try:
        state, text = await read(file_path=str(path))
    finally:
        path.chmod(0o600)
    if state == "success":  # running as root: permissions do not apply
        assert text == "     1\tx"
    else:
        assert text == "Error reading file: Permission denied"


async def test_images(tmp_path: pathlib.Path) -> None:
    png = tmp_path / "pic.png"
    png.write_bytes(b"\x89PNG\r\n")
    response = await Read().run({"file_path": str(png)})
    (block,) = response.content
    assert isinstance(block, DataBlock)
    assert block.name == "pic.png"
    assert block.source.media_type == "image/png"  # type: ignore[union-attr]
    assert base64.b64decode(block.source.data) == b"\x89PNG\r\n"  # type: ignore[union-attr]
    bmp = tmp_path / "pic.bmp"
    bmp.write_bytes(b"BM")
    bad = await Read().run({"file_path": str(bmp)})
    assert bad.text() == (
        "Error: Unsupported image type image/bmp, only image/png, image/jpeg, image/gif, "
        "image/webp are supported."
    )
    assert "read images (image/*)" in Read(model_input_types=["image/*"]).description
    assert "read images" not in Read(model_input_types=[]).description


async def test_reads_are_cached_in_the_state(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "f.txt"
    path.write_text("a\nb\n")
    state = AgentState()
    await Read().run({"file_path": str(path), "_agent_state": state})
    (entry,) = state.tool_context.read_file_cache
    assert entry.file_path == str(path)
    assert entry.lines == ["a\n", "b\n"]
    assert entry.updated_at == path.stat().st_mtime


async def test_read_is_read_only_and_rules_match_paths() -> None:
    read_tool = Read()
    engine = PermissionEngine(PermissionContext(mode="explore"))
    decision = await engine.check_permission(read_tool, {"file_path": "/etc/hosts"})
    assert decision.behavior == PermissionBehavior.ALLOW
    assert await read_tool.match_rule("/src/**", {"file_path": "/src/a/b.py"}) is True
    assert await read_tool.match_rule("/src/**", {"file_path": "/etc/x"}) is False
    (rule,) = await read_tool.generate_suggestions({"file_path": "/src/[x]/a.py"})
    assert rule.rule_content == "/src/[[]x]/**"
    assert await read_tool.generate_suggestions({}) == []
