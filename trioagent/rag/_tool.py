"""``search_knowledge``: the tool that lets a model search knowledge bases when it decides to."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from .._core.json_types import JSONObject
from ..message import TextBlock, ToolResultState
from ..model import ChatModelBase
from ..permission import PermissionBehavior, PermissionContext, PermissionDecision
from ..tool import Emit, ToolBase, ToolChunk
from ._format import NO_RESULTS_TEXT, format_results
from ._knowledge import KnowledgeBase
from ._rerank import DEFAULT_RERANK_PROMPT
from ._search import search_across

__all__ = ["SearchKnowledgeTool"]

logger = logging.getLogger("trioagent.middleware")

_QUERY_DESCRIPTION = (
    "The query string to search the knowledge base(s) with. Must be concise, explicit, and "
    "self-contained: AVOID ambiguous references like `he`/`she`/`it`, "
    "`today`/`yesterday`/`tomorrow`, `here`/`there`, etc. — the search is purely semantic and "
    "has no conversational context. Phrase the query as a complete statement of what you want "
    "to find."
)
_KNOWLEDGE_BASES_DESCRIPTION = (
    "Optional subset of knowledge bases to query, by name. When omitted (or `null`) every "
    "equipped knowledge base is searched. Names must exactly match those listed in the tool "
    "description."
)


class SearchKnowledgeTool(ToolBase):
    """The agentic-mode ``search_knowledge`` tool: one search across the equipped knowledge
    bases (or the subset the model names).  Read-only, concurrency-safe, always allowed."""

    name = "search_knowledge"
    is_read_only = True
    is_concurrency_safe = True

    def __init__(
        self,
        knowledge_bases: Sequence[KnowledgeBase],
        top_k: int,
        score_threshold: float | None,
        rerank_model: ChatModelBase | None = None,
        rerank_candidate_k: int | None = None,
        rerank_prompt: str = DEFAULT_RERANK_PROMPT,
    ) -> None:
        super().__init__()
        self.knowledge_bases = list(knowledge_bases)
        self.top_k = top_k
        self.score_threshold = score_threshold
        self.rerank_model = rerank_model
        self.rerank_candidate_k = rerank_candidate_k
        self.rerank_prompt = rerank_prompt
        self.description = self._build_description()
        self.input_schema = self._build_input_schema()

    def _build_description(self) -> str:
        lines = [
            "Search the agent's equipped knowledge bases by semantic similarity and return the "
            "most relevant chunks.",
            "",
            "## When to Use",
            "- The user's question may be answered by content stored in one of the listed "
            "knowledge bases (see *Equipped Knowledge Bases* below).",
            "- You need supporting facts, definitions, or documents that are unlikely to be in "
            "your parametric knowledge.",
            "",
            "## Guidance",
            "- Knowledge base names and descriptions are user-supplied and may be terse, vague, "
            "or unrelated to the actual contents. When in doubt, try the search — a single call "
            "is cheap and an empty result is informative.",
            "- Phrase `query` as a self-contained statement of what you want to find. Avoid "
            "pronouns or relative time references — the search is purely semantic and has no "
            "conversational context.",
            "- Set `knowledge_bases` only when the question clearly matches one or two specific "
            "bases; otherwise leave it unset to search them all.",
            "",
            "## Equipped Knowledge Bases",
        ]
        if self.knowledge_bases:
            lines.append(
                f"The agent is currently equipped with {len(self.knowledge_bases)} knowledge "
                "base(s):"
            )
            lines.extend(f"- **{kb.name}**: {kb.description}" for kb in self.knowledge_bases)
        else:
            lines.append(
                "No knowledge bases are currently equipped. **Do not call this tool** — it will "
                "return nothing."
            )
        return "\n".join(lines)

    def _build_input_schema(self) -> JSONObject:
        items: JSONObject = {"type": "string"}
        if self.knowledge_bases:
            items["enum"] = [kb.name for kb in self.knowledge_bases]
        return {
            "type": "object",
            "title": "SearchKnowledgeParams",
            "properties": {
                "query": {"type": "string", "title": "Query", "description": _QUERY_DESCRIPTION},
                "knowledge_bases": {
                    "anyOf": [{"type": "array", "items": items}, {"type": "null"}],
                    "default": None,
                    "title": "Knowledge Bases",
                    "description": _KNOWLEDGE_BASES_DESCRIPTION,
                },
            },
            "required": ["query"],
        }

    async def check_permissions(
        self, tool_input: Mapping[str, object], context: PermissionContext
    ) -> PermissionDecision:
        """Always allowed."""
        return PermissionDecision(
            behavior=PermissionBehavior.ALLOW, message="Knowledge-base search is read-only."
        )

    async def call(
        self,
        emit: Emit,
        /,
        query: str | None = None,
        knowledge_bases: list[str] | None = None,
        **kwargs: object,
    ) -> ToolChunk:
        """Search; the hits as numbered, cited blocks (or a notice when there are none).

        A failing search is an error result ``"Search failed: <error>"`` the model can read;
        so is a missing ``query``.  Unknown extra arguments are ignored.
        """
        if not isinstance(query, str):
            return ToolChunk(
                content=[TextBlock(text="Invalid arguments: `query` must be a string.")],
                state=ToolResultState.ERROR,
                is_last=True,
            )
        if knowledge_bases is None:
            targets = list(self.knowledge_bases)
        else:
            wanted = set(knowledge_bases)
            targets = [kb for kb in self.knowledge_bases if kb.name in wanted]
        if not targets:
            return _notice()
        try:
            results = await search_across(
                targets,
                [query],
                top_k=self.top_k,
                score_threshold=self.score_threshold,
                rerank_model=self.rerank_model,
                rerank_candidate_k=self.rerank_candidate_k,
                rerank_prompt=self.rerank_prompt,
            )
        except Exception as exc:  # Cancelled is not an Exception: it propagates
            logger.warning("search_knowledge failed: %s", exc, exc_info=True)
            return ToolChunk(
                content=[TextBlock(text=f"Search failed: {exc}")],
                state=ToolResultState.ERROR,
                is_last=True,
            )
        blocks = format_results(results)
        if not blocks:
            return _notice()
        return ToolChunk(content=blocks, state=ToolResultState.SUCCESS, is_last=True)


def _notice() -> ToolChunk:
    return ToolChunk(
        content=[TextBlock(text=NO_RESULTS_TEXT)], state=ToolResultState.SUCCESS, is_last=True
    )
