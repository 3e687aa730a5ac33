"""Retrieval-augmented generation: embedding models, vector stores and knowledge bases
(reference/tools_middleware.md §9, reference/model.md §6).

The agent-side piece is :class:`trioagent.middleware.RAGMiddleware`; this package holds what it
searches::

    from trioagent.rag import InMemoryVectorStore, KnowledgeBase, OpenAIEmbeddingModel

    embedder = OpenAIEmbeddingModel("text-embedding-3-small", dimensions=512)
    kb = KnowledgeBase("handbook", "HR and onboarding documents.", embedder,
                       InMemoryVectorStore())
    await kb.add_texts(["Paid time off is 25 days a year."], source="pto.md")
    hits = await kb.search(["How many vacation days do I get?"], top_k=3)
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
from ._knowledge import KnowledgeBase as KnowledgeBase
from ._openai import OpenAIEmbeddingModel as OpenAIEmbeddingModel
from ._store import (
    InMemoryVectorStore as InMemoryVectorStore,
    VectorStoreBase as VectorStoreBase,
    cosine_similarity as cosine_similarity,
)
from ._types import (
    Chunk as Chunk,
    Document as Document,
    DocumentSummary as DocumentSummary,
    VectorRecord as VectorRecord,
    VectorSearchResult as VectorSearchResult,
)

__all__ = [
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
    "VectorRecord",
    "VectorSearchResult",
    "VectorStoreBase",
    "approx_tokens",
    "chunk_document",
    "cosine_similarity",
    "split_text",
]
