"""``Read`` as in AgentScope 2.0.11: numbered lines with offset and limit, long lines cut,
images as data blocks, the read cache in the agent state, and bad input as error results."""

from __future__ import annotations

import base64
import io
import pathlib
import sys

import pytest
from agent_kit import call, calls, make_agent, text, user

from trioagent.agent import Agent, AgentState
from trioagent.exception import MissingExtraError
from trioagent.message import DataBlock
from trioagent.permission import PermissionBehavior, PermissionContext, PermissionEngine
from trioagent.testing import SweepRun, cancel_sweep
from trioagent.tool import Read, Toolkit


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
        f"Error: {binary} is a binary file; only text files, images and PDFs can be read.",
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


# -- PDFs ---------------------------------------------------------------------------------------


def pdf_of(*page_texts: str) -> bytes:
    """A minimal, valid PDF with one line of Helvetica text per page (written by hand, so the
    test depends on no PDF writer)."""
    count = len(page_texts)
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids ["
        + b" ".join(f"{4 + 2 * i} 0 R".encode() for i in range(count))
        + f"] /Count {count} >>".encode(),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    for i, page_text in enumerate(page_texts):
        stream = f"BT /F1 12 Tf 72 720 Td ({page_text}) Tj ET".encode()
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            b"/Resources << /Font << /F1 3 0 R >> >> /Contents " + f"{5 + 2 * i} 0 R >>".encode()
        )
        objects.append(f"<< /Length {len(stream)} >>\nstream\n".encode() + stream + b"\nendstream")
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{offset:010d} 00000 n \n".encode() for offset in offsets)
    out += (
        f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    )
    return bytes(out)


async def test_a_pdf_is_read_as_text_page_by_page(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "report.pdf"
    path.write_bytes(pdf_of("Alpha page", "Beta page", "Gamma page"))
    state, text = await read(file_path=str(path))
    assert state == "success"
    assert text == (
        "--- Page 1/3 ---\nAlpha page\n\n--- Page 2/3 ---\nBeta page\n\n--- Page 3/3 ---\nGamma page"
    )
    assert await read(file_path=str(path), pages="2") == ("success", "--- Page 2/3 ---\nBeta page")
    state, text = await read(file_path=str(path), pages=" 2 - 9 ")  # cut to the last page
    assert text == "--- Page 2/3 ---\nBeta page\n\n--- Page 3/3 ---\nGamma page"


async def test_a_model_that_reads_pdfs_gets_the_requested_pages_as_a_document(
    tmp_path: pathlib.Path,
) -> None:
    from pypdf import PdfReader

    path = tmp_path / "report.pdf"
    path.write_bytes(pdf_of("Alpha page", "Beta page", "Gamma page"))
    tool = Read(model_input_types=["image/*", "application/pdf"])
    assert "presented to you as a document" in tool.description
    whole = await tool.run({"file_path": str(path)})
    [block] = whole.content
    assert isinstance(block, DataBlock)
    assert block.source.media_type == "application/pdf"
    assert block.name == "report.pdf"
    assert base64.b64decode(block.source.data) == path.read_bytes()  # the file itself
    part = await tool.run({"file_path": str(path), "pages": "2-3"})
    [block] = part.content
    assert isinstance(block, DataBlock)
    pages = PdfReader(io.BytesIO(base64.b64decode(block.source.data))).pages
    assert [page.extract_text() for page in pages] == ["Beta page", "Gamma page"]


@pytest.mark.parametrize(
    ("pages", "count", "message"),
    [
        (None, 11, "Error: PDF has 11 pages, more than 10. Give the pages parameter"),
        ("1-21", 30, "Error: Requested 21 pages; at most 20 pages can be read per request."),
        ("4", 3, "Error: Invalid pages '4'. The PDF has 3 page(s)."),
        ("3-2", 3, "Error: Invalid pages '3-2'. The PDF has 3 page(s)."),
        ("0", 3, "Error: Invalid pages '0'. The PDF has 3 page(s)."),
        ("first", 3, "Error: Invalid pages 'first'. Expected a page number or range"),
    ],
)
async def test_bad_page_ranges_are_error_results(
    tmp_path: pathlib.Path, pages: str | None, count: int, message: str
) -> None:
    path = tmp_path / "long.pdf"
    path.write_bytes(pdf_of(*(f"page {i}" for i in range(count))))
    kwargs: dict[str, object] = {"file_path": str(path)}
    if pages is not None:
        kwargs["pages"] = pages
    state, text = await read(**kwargs)
    assert state == "error"
    assert text.startswith(message)


async def test_a_damaged_pdf_is_an_error_result(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "broken.pdf"
    path.write_bytes(b"%PDF-1.4\nthis is not a pdf at all")
    state, text = await read(file_path=str(path))
    assert state == "error"
    assert text.startswith("Error reading PDF: ")


async def test_a_pdf_without_the_pdf_extra_names_the_install_command(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "report.pdf"
    path.write_bytes(pdf_of("Alpha page"))
    monkeypatch.setitem(sys.modules, "pypdf", None)  # as if pypdf were not installed
    with pytest.raises(MissingExtraError, match=r"pip install 'trioagent\[pdf\]'") as info:
        await Read().run({"file_path": str(path)})
    assert isinstance(info.value, ImportError)
    assert info.value.name == "pypdf"
    assert (
        str(info.value) == "reading PDF files needs the 'pdf' extra: pip install 'trioagent[pdf]'"
    )


@pytest.mark.parametrize("mode", ["interrupt", "outer"])
async def test_sweep_a_reply_that_reads_a_pdf(mode: str, tmp_path: pathlib.Path) -> None:
    """Cancelled at every point of a reply whose tool parses a PDF in worker threads: one end,
    the call exactly one result (the pages' text when it finished), no thread's work leaks."""
    path = tmp_path / "report.pdf"
    path.write_bytes(pdf_of("Alpha page", "Beta page"))

    def make() -> Agent:
        steps = [calls(call("r1", "Read", file_path=str(path))), text("read it")]
        return make_agent(steps, Toolkit([Read()]))

    def check(run: SweepRun) -> None:
        finished = run.end is not None and run.end.finished_reason == "completed"
        outputs = [
            str(block.output)
            for msg in run.agent.state.context
            for block in msg.content
            if getattr(block, "type", None) == "tool_result"
        ]
        if finished:
            assert len(outputs) == 1
            assert "Beta page" in outputs[0]

    report = await cancel_sweep(make, user, mode=mode, check=check)
    assert report.runs[0].end is not None
    assert report.runs[0].end.finished_reason == "completed"
    assert report.outcomes["interrupted"] > 0
