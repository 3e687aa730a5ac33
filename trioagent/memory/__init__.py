"""Long-term memory for agents: Markdown files the model manages itself, and mem0.

The agent-side pieces are :class:`trioagent.middleware.AgenticMemoryMiddleware` and
:class:`trioagent.middleware.Mem0Middleware`; this package holds what they remember with::

    from trioagent.memory import LocalBackend, MemoryDirectory, Mem0Memory, Mem0PlatformClient

    directory = MemoryDirectory("/work", "Memory", LocalBackend())
    hint = await directory.retrieve(model, "user: what did I say about the deploy?")

    memory = Mem0Memory(Mem0PlatformClient(), user_id="alice")
    await memory.add_with_fallback("Alice deploys on Fridays.")
    facts = await memory.search("deploy day")
"""

from ._agentic import (
    DEFAULT_MEMORY_INSTRUCTIONS as DEFAULT_MEMORY_INSTRUCTIONS,
    DEFAULT_RETRIEVAL_INSTRUCTIONS as DEFAULT_RETRIEVAL_INSTRUCTIONS,
    MEMORY_INDEX as MEMORY_INDEX,
    MemoryDirectory as MemoryDirectory,
    MemoryFileHeader as MemoryFileHeader,
    parse_frontmatter as parse_frontmatter,
    truncate_to_tokens as truncate_to_tokens,
)
from ._files import LocalBackend as LocalBackend, MemoryBackend as MemoryBackend
from ._mem0 import (
    Mem0Client as Mem0Client,
    Mem0Memory as Mem0Memory,
    extract_memory_texts as extract_memory_texts,
    extract_query_text as extract_query_text,
    mem0_extracted_anything as mem0_extracted_anything,
    resolve_mem0_client as resolve_mem0_client,
)
from ._mem0_client import Mem0APIError as Mem0APIError, Mem0PlatformClient as Mem0PlatformClient
from ._mem0_tools import AddMemoryTool as AddMemoryTool, SearchMemoryTool as SearchMemoryTool

__all__ = [
    "DEFAULT_MEMORY_INSTRUCTIONS",
    "DEFAULT_RETRIEVAL_INSTRUCTIONS",
    "MEMORY_INDEX",
    "AddMemoryTool",
    "LocalBackend",
    "Mem0APIError",
    "Mem0Client",
    "Mem0Memory",
    "Mem0PlatformClient",
    "MemoryBackend",
    "MemoryDirectory",
    "MemoryFileHeader",
    "SearchMemoryTool",
    "extract_memory_texts",
    "extract_query_text",
    "mem0_extracted_anything",
    "parse_frontmatter",
    "resolve_mem0_client",
    "truncate_to_tokens",
]
