"""``Read``: a text file with line numbers, an image as a data block, a PDF as a document or
its text."""

from __future__ import annotations

import base64
import fnmatch
import io
import os
import re
import stat

import trio

from ..._core.json_types import JSONObject
from ...exception import MissingExtraError
from ...message import Base64Source, DataBlock, TextBlock
from ...permission import PermissionBehavior, PermissionContext, PermissionDecision
from .._base import ToolMiddlewareBase
from .._response import Emit, ToolChunk
from ._common import PathRuleTool, error, normalize_newlines, read_bytes, stat_path

__all__ = ["Read"]

IMAGE_TYPES: dict[str, str] = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
    ".bmp": "image/bmp",
    ".tiff": "image/tiff",
    ".tif": "image/tiff",
    ".ico": "image/x-icon",
}
DEFAULT_MODEL_INPUT_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
#: How much of a file is inspected for NUL bytes to call it binary.
BINARY_SNIFF_BYTES = 8192
#: A PDF with more pages needs an explicit ``pages`` range; one read returns at most
#: ``PDF_MAX_PAGES_PER_READ`` pages.
PDF_MAX_PAGES_WITHOUT_RANGE = 10
PDF_MAX_PAGES_PER_READ = 20
_PAGES = re.compile(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?")

_DESCRIPTION = """Reads a file from the local filesystem. You can access any file directly by using this tool.
Assume this tool is able to read all files on the machine. If the User provides a path to a file assume that path is valid. It is okay to read a file that does not exist; an error will be returned.

Usage:
- The file_path parameter must be an absolute path, not a relative path
- By default, it reads up to 2000 lines starting from the beginning of the file
- You can optionally specify a line offset and limit (especially handy for long files), but it's recommended to read the whole file by not providing these parameters
- Results are returned using cat -n format, with line numbers starting at 1"""


class Read(PathRuleTool):
    """Reads a file: text as numbered lines (``cat -n`` style), images the model accepts as
    a base64 data block, PDFs (a ``pages`` range of them) as an ``application/pdf`` data
    block when the model accepts that type, else as their extracted text.  Binary files,
    directories, missing files and relative paths are error results.  Read-only; records
    what it read in the agent state's file cache, which ``Write`` and ``Edit`` require.

    Args:
        max_line_characters: longer lines are cut and marked ``[truncated]``.
        model_input_types: media types the model accepts (globs allowed, e.g. ``image/*``);
            an image of another type is an error result, a PDF is read as text unless
            ``application/pdf`` is accepted.
        middlewares: this tool's middlewares.
    """

    name = "Read"
    input_schema: JSONObject = {  # noqa: RUF012
        "type": "object",
        "properties": {
            "file_path": {
                "type": "string",
                "description": "The absolute path to the file to read.",
            },
            "offset": {
                "type": "integer",
                "minimum": 1,
                "default": 1,
                "description": "Optional 1-based line number to start reading from. Only "
                "applies to plain text files (default: 1)",
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": 2000,
                "default": 2000,
                "description": "Optional maximum number of lines to read. Only applies to "
                "plain text files (default: 2000, max: 2000)",
            },
            "pages": {
                "type": "string",
                "description": 'Page range for PDF files (e.g. "1-5", "3", "10-20"), at most '
                f"{PDF_MAX_PAGES_PER_READ} pages per request; required for PDFs of more than "
                f"{PDF_MAX_PAGES_WITHOUT_RANGE} pages. Only applies to PDF files.",
            },
        },
        "required": ["file_path"],
    }
    is_read_only = True
    is_concurrency_safe = True
    is_state_injected = True

    def __init__(
        self,
        max_line_characters: int = 2000,
        model_input_types: list[str] | None = None,
        middlewares: list[ToolMiddlewareBase] | None = None,
    ) -> None:
        super().__init__(middlewares)
        self._max_line_characters = max_line_characters
        self.model_input_types = list(
            DEFAULT_MODEL_INPUT_TYPES if model_input_types is None else model_input_types
        )
        images = [t for t in self.model_input_types if t.startswith("image/")]
        self.description = _DESCRIPTION
        if images:
            self.description += (
                f"\n- This tool allows you to read images ({', '.join(images)}). When reading "
                "an image file the contents are presented visually as you're a multimodal LLM."
            )
        shown = (
            "the pages are presented to you as a document"
            if self._accepts("application/pdf")
            else "the text of the pages is returned"
        )
        self.description += (
            f"\n- This tool can read PDF files (.pdf): {shown}. For PDFs of more than "
            f"{PDF_MAX_PAGES_WITHOUT_RANGE} pages you MUST give the pages parameter (at most "
            f"{PDF_MAX_PAGES_PER_READ} pages per request)."
        )

    def _accepts(self, media_type: str) -> bool:
        return any(fnmatch.fnmatch(media_type, t) for t in self.model_input_types)

    async def check_permissions(
        self, tool_input: JSONObject, context: PermissionContext
    ) -> PermissionDecision:
        """Reading defers to the engine (its read-only fast path allows it)."""
        return PermissionDecision(
            behavior=PermissionBehavior.PASSTHROUGH, message="File reading is read-only."
        )

    async def call(
        self,
        emit: Emit,
        /,
        file_path: str = "",
        offset: int = 1,
        limit: int = 2000,
        pages: str | None = None,
        _agent_state: object = None,
        **_: object,
    ) -> ToolChunk:
        """Read ``file_path`` from line ``offset`` (1-based), at most ``limit`` lines (a PDF:
        the ``pages`` range)."""
        if not os.path.isabs(file_path):
            return error(f"Error: file_path must be an absolute path, got: {file_path}")
        info = await stat_path(file_path)
        if info is None:
            return error(f"Error: File does not exist: {file_path}")
        if stat.S_ISDIR(info.st_mode):
            return error(f"Error: Path is a directory, not a file: {file_path}")
        mtime = info.st_mtime
        extension = os.path.splitext(file_path)[1].lower()
        try:
            if extension in IMAGE_TYPES:
                return await self._read_image(file_path, IMAGE_TYPES[extension])
            if extension == ".pdf":
                return await self._read_pdf(file_path, pages)
            lines = await self._text_lines(file_path, mtime, _agent_state)
        except OSError as exc:
            return error(f"Error reading file: {exc.strerror or exc}")
        if lines is None:
            return error(
                f"Error: {file_path} is a binary file; only text files, images and PDFs can "
                "be read."
            )
        selected = lines[offset - 1 : offset - 1 + limit]
        numbered = []
        for number, line in enumerate(selected, start=offset):
            text = line.rstrip("\n")
            if len(text) > self._max_line_characters:
                text = text[: self._max_line_characters] + "[truncated]"
            numbered.append(f"{number:6d}\t{text}")
        return ToolChunk(content=[TextBlock(text="\n".join(numbered))])

    async def _text_lines(self, path: str, mtime: float, state: object) -> list[str] | None:
        """The file's lines (from the state's cache when it is fresh); ``None`` for binary."""
        cache = getattr(state, "tool_context", None)
        entry = cache.get_cache(path, mtime) if cache is not None else None
        if entry is not None:
            return list(entry.lines)
        raw = await read_bytes(path)
        if b"\0" in raw[:BINARY_SNIFF_BYTES]:
            return None
        lines = normalize_newlines(raw.decode("utf-8", errors="replace")).splitlines(True)
        if cache is not None:
            cache.cache_file(path, lines, mtime)
        return lines

    async def _read_image(self, path: str, media_type: str) -> ToolChunk:
        if not self._accepts(media_type):
            accepted = [t for t in self.model_input_types if t.startswith("image/")]
            return error(
                f"Error: Unsupported image type {media_type}, only "
                f"{', '.join(accepted) or 'none'} are supported."
            )
        raw = await read_bytes(path)
        block = DataBlock(
            source=Base64Source(data=base64.b64encode(raw).decode("ascii"), media_type=media_type),
            name=os.path.basename(path),
        )
        return ToolChunk(content=[block])

    async def _read_pdf(self, path: str, pages: str | None) -> ToolChunk:
        """The ``pages`` of the PDF at ``path``: the document itself (only those pages) when
        the model accepts PDFs, else their text, page by page.  Parsing runs in a worker
        thread that a cancellation abandons (it has no side effects)."""
        try:
            from pypdf import PdfReader, PdfWriter
        except ImportError as exc:
            raise MissingExtraError("reading PDF files", "pdf", module="pypdf") from exc

        raw = await read_bytes(path)

        def parse() -> tuple[PdfReader, int]:
            reader = PdfReader(io.BytesIO(raw))
            return reader, len(reader.pages)

        try:
            reader, total = await trio.to_thread.run_sync(parse, abandon_on_cancel=True)
        except Exception as exc:  # pypdf's errors on a damaged or encrypted file
            return error(f"Error reading PDF: {exc}")
        span = _page_span(pages, total)
        if isinstance(span, str):
            return error(span)
        first, last = span
        name = os.path.basename(path)

        def document() -> bytes:
            if (first, last) == (1, total):
                return raw
            writer = PdfWriter()
            for number in range(first, last + 1):
                writer.add_page(reader.pages[number - 1])
            out = io.BytesIO()
            writer.write(out)
            return out.getvalue()

        def text() -> str:
            return "\n\n".join(
                f"--- Page {number}/{total} ---\n{reader.pages[number - 1].extract_text() or ''}"
                for number in range(first, last + 1)
            )

        try:
            if self._accepts("application/pdf"):
                data = await trio.to_thread.run_sync(document, abandon_on_cancel=True)
                source = Base64Source(
                    data=base64.b64encode(data).decode("ascii"), media_type="application/pdf"
                )
                return ToolChunk(content=[DataBlock(source=source, name=name)])
            extracted = await trio.to_thread.run_sync(text, abandon_on_cancel=True)
        except Exception as exc:
            return error(f"Error reading PDF: {exc}")
        return ToolChunk(content=[TextBlock(text=extracted)])


def _page_span(pages: str | None, total: int) -> tuple[int, int] | str:
    """The 1-based, inclusive page range ``pages`` names in a PDF of ``total`` pages, or the
    error text for the model."""
    if pages is None:
        if total > PDF_MAX_PAGES_WITHOUT_RANGE:
            return (
                f"Error: PDF has {total} pages, more than {PDF_MAX_PAGES_WITHOUT_RANGE}. Give "
                f'the pages parameter (e.g. "1-5") to read specific pages, at most '
                f"{PDF_MAX_PAGES_PER_READ} pages per request."
            )
        return 1, total
    match = _PAGES.fullmatch(pages)
    if match is None:
        return f'Error: Invalid pages {pages!r}. Expected a page number or range like "3" or "1-5".'
    first = int(match.group(1))
    last = int(match.group(2)) if match.group(2) else first
    if first < 1 or first > last or first > total:
        return f"Error: Invalid pages {pages!r}. The PDF has {total} page(s)."
    last = min(last, total)
    if last - first + 1 > PDF_MAX_PAGES_PER_READ:
        return (
            f"Error: Requested {last - first + 1} pages; at most {PDF_MAX_PAGES_PER_READ} "
            "pages can be read per request."
        )
    return first, last
