"""One search across several knowledge bases: concurrent queries, hits merged by score, an
optional rerank by a chat model."""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence

from .._core.gather import gather
from ..message import DataBlock, TextBlock
from ..model import ChatModelBase
from ._knowledge import KnowledgeBase
from ._rerank import DEFAULT_RERANK_PROMPT, rerank_results
from ._types import VectorSearchResult

__all__ = ["MAX_CANDIDATE_K", "search_across"]

# The logger of the RAG middleware, which runs this search for the agent.
logger = logging.getLogger("trioagent.middleware")

#: The most candidates a rerank model is given to judge.
MAX_CANDIDATE_K = 50


async def search_across(
    knowledge_bases: Sequence[KnowledgeBase],
    queries: Sequence[str | TextBlock | DataBlock],
    *,
    top_k: int,
    score_threshold: float | None = None,
    rerank_model: ChatModelBase | None = None,
    rerank_candidate_k: int | None = None,
    rerank_prompt: str = DEFAULT_RERANK_PROMPT,
) -> list[VectorSearchResult]:
    """Search every knowledge base concurrently and merge the hits by score.

    Each knowledge base drops the queries its embedding model cannot take.  Scores of
    knowledge bases with different embedding models are merged as they are, although they are
    not strictly comparable.  With a ``rerank_model`` the candidate count widens to
    ``min(rerank_candidate_k or 2 * top_k, 50)`` and :func:`rerank_results` picks the final
    ``top_k``; a failing rerank keeps the vector order.  A failing knowledge base fails the
    whole search (its exception propagates, not wrapped in a group).
    """
    if not queries or not knowledge_bases:
        return []
    if rerank_model is not None:
        candidates = min(rerank_candidate_k or top_k * 2, MAX_CANDIDATE_K)
    else:
        candidates = top_k
    query_list = list(queries)
    per_kb = await gather(
        [
            functools.partial(
                kb.search, query_list, top_k=candidates, score_threshold=score_threshold
            )
            for kb in knowledge_bases
        ]
    )
    merged = [hit for hits in per_kb for hit in hits]
    merged.sort(key=lambda hit: hit.score, reverse=True)
    results = merged[:candidates]
    if rerank_model is None or not results:
        return results
    try:
        return await rerank_results(rerank_model, query_list, results, top_k, rerank_prompt)
    except Exception as exc:  # best effort; Cancelled is not an Exception
        logger.warning("knowledge-base rerank failed (%s); falling back to vector order", exc)
        return results[:top_k]
