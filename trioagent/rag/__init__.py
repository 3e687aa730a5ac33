"""Retrieval-augmented generation: embedding models, vector stores, knowledge bases, and the
search across them (merged by score, optionally reranked by a chat model).

The agent-side piece is :class:`trioagent.middleware.RAGMiddleware`; this package holds what it
searches and how::

    from trioagent.rag import InMemoryVectorStore, KnowledgeBase, OpenAIEmbeddingModel

    embedder = OpenAIEmbeddingModel("text-embedding-3-small", dimensions=512)
    kb = KnowledgeBase("handbook", "HR and onboarding documents.", embedder,
                       InMemoryVectorStore())
    await kb.add_texts(["Paid time off is 25 days a year."], source="pto.md")
    hits = await kb.search(["How many vacation days do I get?"], top_k=3)
    hits = await search_across([kb, wiki], ["vacation days"], top_k=5, rerank_model=model)
"""

from ._chunking import (
    approx_tokens as approx_tokens,
    chunk_document as chunk_document,
    split_text as split_text,
)
from ._embedding import (
    EmbeddingCacheBase as EmbeddingCacheBase,
    EmbeddingInput as EmbeddingInput,
    EmbeddingModelBase as EmbeddingModelBase,
    EmbeddingResponse as EmbeddingResponse,
    EmbeddingUsage as EmbeddingUsage,
    InMemoryEmbeddingCache as InMemoryEmbeddingCache,
)
from ._format import (
    NO_RESULTS_TEXT as NO_RESULTS_TEXT,
    format_results as format_results,
    query_blocks as query_blocks,
    wrap_hint as wrap_hint,
)
from ._knowledge import KnowledgeBase as KnowledgeBase
from ._openai import OpenAIEmbeddingModel as OpenAIEmbeddingModel
from ._rerank import (
    DEFAULT_RERANK_PROMPT as DEFAULT_RERANK_PROMPT,
    rerank_results as rerank_results,
)
from ._search import MAX_CANDIDATE_K as MAX_CANDIDATE_K, search_across as search_across
from ._store import (
    InMemoryVectorStore as InMemoryVectorStore,
    VectorStoreBase as VectorStoreBase,
    cosine_similarity as cosine_similarity,
)
from ._tool import SearchKnowledgeTool as SearchKnowledgeTool
from ._types import (
    Chunk as Chunk,
    Document as Document,
    DocumentSummary as DocumentSummary,
    VectorRecord as VectorRecord,
    VectorSearchResult as VectorSearchResult,
)

__all__ = [
    "DEFAULT_RERANK_PROMPT",
    "MAX_CANDIDATE_K",
    "NO_RESULTS_TEXT",
    "Chunk",
    "Document",
    "DocumentSummary",
    "EmbeddingCacheBase",
    "EmbeddingInput",
    "EmbeddingModelBase",
    "EmbeddingResponse",
    "EmbeddingUsage",
    "InMemoryEmbeddingCache",
    "InMemoryVectorStore",
    "KnowledgeBase",
    "OpenAIEmbeddingModel",
    "SearchKnowledgeTool",
    "VectorRecord",
    "VectorSearchResult",
    "VectorStoreBase",
    "approx_tokens",
    "chunk_document",
    "cosine_similarity",
    "format_results",
    "query_blocks",
    "rerank_results",
    "search_across",
    "split_text",
    "wrap_hint",
]
