"""Skills from SKILL.md files: the frontmatter reader, and the local loader (one directory, or
every directory below it), which skips a broken skill with a warning that names the problem."""

from __future__ import annotations

import logging
import os
import pathlib

import pytest

from trioagent.skill import LocalSkillLoader, Skill, SkillFormatError, parse_skill_markdown

GOOD = """---
name: pdf-tools
description: "Fill and merge PDF forms"
# a comment
license: MIT
---
# PDF tools

Run `scripts/fill.py`.
"""


def write_skill(directory: pathlib.Path, text: str) -> pathlib.Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "SKILL.md").write_text(text, encoding="utf-8")
    return directory


def test_frontmatter_fields_and_body() -> None:
    fields, body = parse_skill_markdown(GOOD)
    assert fields == {
        "name": "pdf-tools",
        "description": "Fill and merge PDF forms",
        "license": "MIT",
    }
    assert body == "# PDF tools\n\nRun `scripts/fill.py`.\n"


def test_frontmatter_block_values_quotes_and_bom() -> None:
    text = (
        "\ufeff---\r\nname: 'it''s'\r\ndescription: >\r\n  folded over\r\n  two lines\r\n"
        "notes: |\n  kept\n  as lines\nplain: value # trailing comment\n---\nbody"
    )
    fields, body = parse_skill_markdown(text)
    assert fields["name"] == "it's"
    assert fields["description"] == "folded over two lines\n"
    assert fields["notes"] == "kept\nas lines\n"
    assert fields["plain"] == "value"
    assert body == "body"


NESTED = """---
name: pdf-tools
description: "Fill PDF forms: any kind"
license: Apache-2.0
allowed-tools: [Read, Bash]
metadata:
  author: example-org
  version: "1.0"
  tags:
    - pdf
---
body
"""


async def test_frontmatter_is_yaml_with_a_nested_metadata_map(tmp_path: pathlib.Path) -> None:
    """Valid YAML as the Agent Skills format writes it (a nested ``metadata:`` map, a flow
    list) is a skill; every field is kept in ``Skill.frontmatter``."""
    write_skill(tmp_path, NESTED)
    (skill,) = await LocalSkillLoader(str(tmp_path)).list_skills()
    assert (skill.name, skill.description) == ("pdf-tools", "Fill PDF forms: any kind")
    assert skill.frontmatter["metadata"] == {
        "author": "example-org",
        "version": "1.0",
        "tags": ["pdf"],
    }
    assert skill.frontmatter["allowed-tools"] == ["Read", "Bash"]


async def test_invalid_yaml_is_a_warning_naming_the_file_and_line(
    tmp_path: pathlib.Path, caplog: pytest.LogCaptureFixture
) -> None:
    skill_dir = write_skill(tmp_path, "---\nname: x\ndescription: Use when: a PDF\n---\nbody")
    with caplog.at_level(logging.WARNING, logger="trioagent.skill"):
        assert await LocalSkillLoader(str(tmp_path)).list_skills() == []
    (record,) = caplog.records
    assert record.levelno == logging.WARNING
    assert str(skill_dir / "SKILL.md") in record.getMessage()
    assert "not valid YAML (line 3: mapping values are not allowed here)" in record.getMessage()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("# no frontmatter\n", "expected a frontmatter block opened by '---' on line 1"),
        ("---\nname: x\n", "the frontmatter block is never closed by '---'"),
        ("---\n- name\n---\n", "the frontmatter must be a YAML map of fields, got a list"),
        (
            '---\nname: "x\n---\n',
            "the frontmatter is not valid YAML (line 2: found unexpected end of stream); quote "
            "a value that holds ': ' or starts with a special character",
        ),
    ],
)
def test_bad_frontmatter_is_a_clear_error(text: str, message: str) -> None:
    with pytest.raises(SkillFormatError) as info:
        parse_skill_markdown(text, "skills/x/SKILL.md")
    assert str(info.value) == f"skills/x/SKILL.md: {message}"


async def test_loader_reads_the_directory_itself(tmp_path: pathlib.Path) -> None:
    write_skill(tmp_path, GOOD)
    (skill,) = await LocalSkillLoader(str(tmp_path)).list_skills()
    assert skill.name == "pdf-tools"
    assert skill.dir == str(tmp_path)
    assert skill.markdown.startswith("# PDF tools")
    assert skill.updated_at == os.path.getmtime(tmp_path / "SKILL.md")


async def test_loader_scans_subdirectories_only_when_asked(tmp_path: pathlib.Path) -> None:
    write_skill(tmp_path / "b", GOOD.replace("pdf-tools", "bravo"))
    write_skill(tmp_path / "a" / "deep", GOOD.replace("pdf-tools", "alpha"))
    assert await LocalSkillLoader(str(tmp_path)).list_skills() == []
    skills = await LocalSkillLoader(str(tmp_path), scan_subdir=True).list_skills()
    assert [s.name for s in skills] == ["alpha", "bravo"]


async def test_a_broken_skill_is_skipped_with_a_warning(
    tmp_path: pathlib.Path, caplog: pytest.LogCaptureFixture
) -> None:
    write_skill(tmp_path / "good", GOOD)
    write_skill(tmp_path / "nameless", "---\ndescription: no name\n---\nbody")
    write_skill(tmp_path / "garbled", "name: x\n")
    write_skill(tmp_path / "numbered", "---\nname: 7\ndescription: d\n---\n")
    loader = LocalSkillLoader(str(tmp_path), scan_subdir=True)
    with caplog.at_level(logging.WARNING, logger="trioagent.skill"):
        skills = await loader.list_skills()
    assert [s.name for s in skills] == ["pdf-tools"]
    text = caplog.text
    assert "the frontmatter lacks the required field(s) name" in text
    assert "expected a frontmatter block" in text
    assert "numbered/SKILL.md: the frontmatter field 'name' must be a string, got int" in text
    with pytest.raises(SkillFormatError, match="lacks the required field"):
        await loader.load_skill(tmp_path / "nameless")


async def test_missing_directory_lists_nothing(
    tmp_path: pathlib.Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="trioagent.skill"):
        assert await LocalSkillLoader(str(tmp_path / "nope")).list_skills() == []
    assert "does not exist" in caplog.text


async def test_unchanged_skill_comes_from_the_cache_and_a_change_is_reread(
    tmp_path: pathlib.Path,
) -> None:
    write_skill(tmp_path, GOOD)
    loader = LocalSkillLoader(str(tmp_path))
    (first,) = await loader.list_skills()
    (again,) = await loader.list_skills()
    assert again is first
    write_skill(tmp_path, GOOD.replace("Fill and merge", "Split"))
    os.utime(tmp_path / "SKILL.md", (first.updated_at + 10, first.updated_at + 10))
    (changed,) = await loader.list_skills()
    assert changed.description == "Split PDF forms"


def test_skill_record() -> None:
    skill = Skill(name="n", description="d", dir="/s", markdown="m")
    assert skill.updated_at == 0.0
    assert "LocalSkillLoader('/abs'" in repr(LocalSkillLoader("/abs"))
