"""``RAGMiddleware``: knowledge-base search in the agent loop.

Two modes (:attr:`RAGMiddleware.Parameters.mode`):

* ``"agentic"`` (default) — :meth:`RAGMiddleware.list_tools` returns one ``search_knowledge``
  tool (:class:`~trioagent.rag.SearchKnowledgeTool`); the model decides when (and which
  knowledge bases) to search.  Nothing is injected.  Middlewares never register tools
  themselves: put them in the toolkit, ``Toolkit(tools=await middleware.list_tools())``.
* ``"static"`` — on the first reasoning step of every reply (``cur_iter == 0``) the reply's
  input messages are searched and the formatted hits are appended to the context as a
  :class:`~trioagent.message.HintBlock` (and announced with a ``HintBlockEvent``).  Unless
  ``persist_hint`` is set the hint is removed again right after that reasoning step — also when
  the step is cancelled or fails — so it takes part in exactly one model call.

The search itself is :func:`trioagent.rag.search_across`: every knowledge base is queried
concurrently, the hits are merged by score and cut to ``top_k``; with a ``rerank_model`` the
widened candidate list (``rerank_candidate_k``, default ``2 * top_k``, at most 50) is reordered
by the chat model's structured output, falling back to the vector order when it fails.

Indexing documents is not this middleware's job; build the
:class:`~trioagent.rag.KnowledgeBase` objects (and fill them) before passing them in.
"""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, Literal

import attrs

from .._core.chain import Kwargs, NextHandler
from .._core.emit import Emit
from .._core.json_types import JSONObject
from ..agent import AgentLike, ReplyItem
from ..event import HintBlockEvent, ReplyStartEvent
from ..message import ContentBlock, DataBlock, HintBlock, Msg, TextBlock
from ..model import ChatModelBase, as_chat_model
from ..rag import (
    DEFAULT_RERANK_PROMPT,
    MAX_CANDIDATE_K,
    KnowledgeBase,
    SearchKnowledgeTool,
    VectorSearchResult,
    format_results,
    query_blocks,
    search_across,
    wrap_hint,
)
from ..serialization import structure, unstructure
from ..tool import ToolBase
from ._base import MiddlewareBase

__all__ = ["DEFAULT_HINT_TEMPLATE", "HINT_SOURCE", "RAGMiddleware"]

logger = logging.getLogger("trioagent.middleware")

DEFAULT_HINT_TEMPLATE = (
    "<system-reminder>The following content is retrieved from the knowledge base(s) and may be "
    "helpful for the current request:\n<content>{context}</content></system-reminder>"
)
#: The ``source`` of injected hints: JSON, so a front end can parse a structured label.
HINT_SOURCE = json.dumps({"label": "KnowledgeBase", "sublabel": ""})


# -- parameters ----------------------------------------------------------------------------------


def _check_mode(instance: object, attribute: attrs.Attribute[str], value: str) -> None:
    if value not in ("agentic", "static"):
        raise ValueError(f"mode must be 'agentic' or 'static', got {value!r}")


def _check_int_range(low: int, high: int) -> Callable[[object, attrs.Attribute[int], int], None]:
    def check(instance: object, attribute: attrs.Attribute[int], value: int) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ValueError(
                f"{attribute.name} must be an integer in [{low}, {high}], got {value!r}"
            )

    return check


def _to_threshold(value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"score_threshold must be a number or None, got {value!r}")
    return float(value)


def _check_bool(instance: object, attribute: attrs.Attribute[bool], value: bool) -> None:
    if not isinstance(value, bool):
        raise ValueError(f"{attribute.name} must be a bool, got {value!r}")


def _check_hint_template(instance: object, attribute: attrs.Attribute[str], value: str) -> None:
    if not isinstance(value, str):
        raise ValueError(f"hint_template must be a str, got {value!r}")
    count = value.count("{context}")
    if count != 1:
        raise ValueError(
            f"hint_template must contain exactly one '{{context}}' placeholder; found {count}."
        )
    try:
        value.format(context="")
    except (IndexError, KeyError, ValueError) as exc:
        raise ValueError(f"hint_template has an unknown placeholder: {exc}.") from exc


def _check_rerank_prompt(instance: object, attribute: attrs.Attribute[str], value: str) -> None:
    if not isinstance(value, str):
        raise ValueError(f"rerank_prompt must be a str, got {value!r}")
    if "{query}" not in value:
        raise ValueError("rerank_prompt must contain a '{query}' placeholder.")
    try:
        value.format(query="", top_k=1)
    except (IndexError, KeyError, ValueError) as exc:
        raise ValueError(f"rerank_prompt has an unknown placeholder: {exc}.") from exc


@attrs.frozen(kw_only=True)
class _Parameters:
    """The tunable search parameters of :class:`RAGMiddleware` (frozen; validated on
    construction — every invalid value raises ``ValueError``).

    Attributes:
        mode: ``"agentic"`` (the model searches with a tool) or ``"static"`` (every reply's
            input is searched and the hits injected).
        top_k: maximum chunks per search across all knowledge bases, 1..50.
        score_threshold: minimum score of a hit (``None``: no filtering).
        rerank_candidate_k: chunks retrieved for the rerank model to judge, 1..50 and at least
            ``top_k`` (``None``: ``2 * top_k``, at most 50).  Ignored without a rerank model.
        emit_hint_event: in static mode, emit a ``HintBlockEvent`` for the injected hint.
        persist_hint: in static mode, keep the hint in the context after the model call.
        hint_template: wraps the formatted hits; exactly one ``{context}`` placeholder and no
            other (not part of :meth:`json_schema`).
        rerank_prompt: the instruction part of the rerank prompt; needs ``{query}``, may use
            ``{top_k}``, nothing else (not part of :meth:`json_schema`).
    """

    mode: Literal["agentic", "static"] = attrs.field(default="agentic", validator=_check_mode)
    top_k: int = attrs.field(default=5, validator=_check_int_range(1, 50))
    score_threshold: float | None = attrs.field(default=None, converter=_to_threshold)
    rerank_candidate_k: int | None = attrs.field(
        default=None, validator=attrs.validators.optional(_check_int_range(1, MAX_CANDIDATE_K))
    )
    emit_hint_event: bool = attrs.field(default=True, validator=_check_bool)
    persist_hint: bool = attrs.field(default=False, validator=_check_bool)
    hint_template: str = attrs.field(default=DEFAULT_HINT_TEMPLATE, validator=_check_hint_template)
    rerank_prompt: str = attrs.field(default=DEFAULT_RERANK_PROMPT, validator=_check_rerank_prompt)

    def __attrs_post_init__(self) -> None:
        if self.rerank_candidate_k is not None and self.rerank_candidate_k < self.top_k:
            raise ValueError(
                f"rerank_candidate_k ({self.rerank_candidate_k}) must be >= top_k ({self.top_k})."
            )

    @classmethod
    def json_schema(cls) -> JSONObject:
        """The JSON schema a front end renders (the prompt templates are left out)."""
        return {
            "title": "Parameters",
            "type": "object",
            "properties": {
                "mode": {
                    "enum": ["static", "agentic"],
                    "default": "agentic",
                    "title": "Mode",
                    "type": "string",
                    "description": "Retrieval is either agentic, letting the Agent decide when "
                    "to retrieve, or static, triggering on every user input.",
                },
                "top_k": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 50,
                    "default": 5,
                    "title": "Top K",
                    "description": "Maximum number of chunks returned per search, across all "
                    "configured knowledge bases.",
                },
                "score_threshold": {
                    "anyOf": [{"type": "number"}, {"type": "null"}],
                    "default": None,
                    "title": "Score Threshold",
                    "description": "Minimum similarity score for a hit to be kept. Leave empty "
                    "to disable filtering.",
                },
                "rerank_candidate_k": {
                    "anyOf": [
                        {"type": "integer", "minimum": 1, "maximum": MAX_CANDIDATE_K},
                        {"type": "null"},
                    ],
                    "default": None,
                    "title": "Rerank Candidate K",
                    "description": "Number of chunks retrieved for the rerank model to judge, "
                    "from which top_k are kept. Must be at least top_k, and defaults to twice "
                    "it. Ignored when no rerank model is configured.",
                },
                "emit_hint_event": {
                    "type": "boolean",
                    "default": True,
                    "title": "Show matched chunks in chat",
                    "description": "Emit a `HintBlockEvent` in static mode so the front-end can "
                    "display the matched snippets to the user.",
                },
                "persist_hint": {
                    "type": "boolean",
                    "default": False,
                    "title": "Persist Hint",
                    "description": "In `static` mode, keep the injected hint block in the agent "
                    "context instead of removing it right after the model call.",
                },
            },
        }


def _remove_block(context: list[Msg], reply_id: str, block_id: str) -> None:
    """Remove ``block_id`` from the latest context message with id ``reply_id``."""
    for msg in reversed(context):
        if msg.id == reply_id:
            msg.content = [b for b in msg.content if b.id != block_id]
            return


# -- the middleware ------------------------------------------------------------------------------


_Parameters.__name__ = "Parameters"
_Parameters.__qualname__ = "RAGMiddleware.Parameters"


class RAGMiddleware(MiddlewareBase):
    """Knowledge-base search for an agent (hooks ``on_reply``, ``on_reasoning``; tool source
    ``list_tools``).

    Args:
        knowledge_bases: the :class:`~trioagent.rag.KnowledgeBase` objects to search (the
            middleware orchestrates them; it does not own or close them).
        parameters: a :class:`RAGMiddleware.Parameters` (or a mapping of its fields);
            defaults to ``Parameters()`` (agentic mode, ``top_k=5``).
        rerank_model: an optional chat model (or a ``"provider:model"`` spec string) that
            reorders a widened candidate list by structured output (best effort).

    Static mode keeps the reply's query blocks in
    ``agent.state.middle_context["RAGMiddleware"][reply_id]`` (as JSON, from the
    ``ReplyStartEvent`` until the reply ends — parked replies included), so one instance can
    serve many agents concurrently.

    The query blocks are never kept on the instance (two overlapping replies would overwrite
    each other's); a reply resumed from a park runs no static search (the events that resume
    it carry no query); only text and data blocks of the input messages form the query.
    """

    Parameters: ClassVar[type[_Parameters]] = _Parameters

    def __init__(
        self,
        knowledge_bases: Sequence[KnowledgeBase],
        parameters: _Parameters | Mapping[str, Any] | None = None,
        rerank_model: ChatModelBase | str | None = None,
    ) -> None:
        if isinstance(parameters, Mapping):
            parameters = _Parameters(**parameters)
        elif parameters is None:
            parameters = _Parameters()
        elif not isinstance(parameters, _Parameters):
            raise TypeError(
                "parameters must be a RAGMiddleware.Parameters, a mapping or None, got "
                f"{type(parameters).__name__}"
            )
        self.knowledge_bases: list[KnowledgeBase] = list(knowledge_bases)
        self.parameters: _Parameters = parameters
        self.rerank_model = (
            None if rerank_model is None else as_chat_model(rerank_model, "rerank_model")
        )

    def __repr__(self) -> str:
        names = [kb.name for kb in self.knowledge_bases]
        return f"RAGMiddleware(knowledge_bases={names!r}, mode={self.parameters.mode!r})"

    async def list_tools(self) -> list[ToolBase]:
        """A fresh ``search_knowledge`` tool in agentic mode; ``[]`` in static mode."""
        if self.parameters.mode != "agentic":
            return []
        p = self.parameters
        return [
            SearchKnowledgeTool(
                self.knowledge_bases,
                top_k=p.top_k,
                score_threshold=p.score_threshold,
                rerank_model=self.rerank_model,
                rerank_candidate_k=p.rerank_candidate_k,
                rerank_prompt=p.rerank_prompt,
            )
        ]

    async def search(
        self, queries: Sequence[str | TextBlock | DataBlock]
    ) -> list[VectorSearchResult]:
        """Search every knowledge base with this middleware's parameters (both modes use it)."""
        p = self.parameters
        return await search_across(
            self.knowledge_bases,
            queries,
            top_k=p.top_k,
            score_threshold=p.score_threshold,
            rerank_model=self.rerank_model,
            rerank_candidate_k=p.rerank_candidate_k,
            rerank_prompt=p.rerank_prompt,
        )

    async def on_reply(
        self,
        agent: AgentLike,
        input_kwargs: Kwargs,
        next_handler: NextHandler[ReplyItem],
        emit: Emit[ReplyItem],
    ) -> None:
        """Static mode: keep the reply's query blocks for its first reasoning step."""
        blocks = (
            query_blocks(input_kwargs.get("inputs")) if self.parameters.mode == "static" else []
        )
        if not blocks:
            await next_handler()
            return
        key = await self.get_middleware_key()
        middle_context: JSONObject = agent.state.middle_context
        stored = [unstructure(block) for block in blocks]
        reply_ids: list[str] = []

        async def sink(item: ReplyItem) -> None:
            if isinstance(item, ReplyStartEvent):
                bucket = middle_context.get(key)
                if not isinstance(bucket, dict):
                    bucket = middle_context[key] = {}
                bucket[item.reply_id] = stored
                reply_ids.append(item.reply_id)
            await emit(item)

        try:
            await next_handler(sink)
        finally:
            bucket = middle_context.get(key)
            if isinstance(bucket, dict):
                for reply_id in reply_ids:
                    bucket.pop(reply_id, None)
                if not bucket:
                    del middle_context[key]

    def _cached_blocks(self, agent: AgentLike, key: str) -> list[TextBlock | DataBlock]:
        bucket = agent.state.middle_context.get(key)
        stored = bucket.get(agent.state.reply_id) if isinstance(bucket, dict) else None
        if not isinstance(stored, list):
            return []
        blocks = structure(stored, list[ContentBlock])
        return [b for b in blocks if isinstance(b, TextBlock | DataBlock)]

    async def on_reasoning(
        self,
        agent: AgentLike,
        input_kwargs: Kwargs,
        next_handler: NextHandler[ReplyItem],
        emit: Emit[ReplyItem],
    ) -> None:
        """Static mode, first reasoning step: search, inject the hint for this step only."""
        p = self.parameters
        if p.mode != "static" or agent.state.cur_iter != 0:
            await next_handler()
            return
        blocks = self._cached_blocks(agent, await self.get_middleware_key())
        if not blocks:
            await next_handler()
            return
        try:
            results = await self.search(blocks)
        except Exception as exc:  # the reply goes on without context; Cancelled propagates
            logger.warning(
                "knowledge-base search failed (%s); proceeding without matched context",
                exc,
                exc_info=True,
            )
            results = []
        formatted = format_results(results)
        if not formatted:
            await next_handler()
            return
        hint = HintBlock(hint=wrap_hint(p.hint_template, formatted), source=HINT_SOURCE)
        reply_id = agent.state.reply_id
        agent.state.append_context(agent.name, [hint])
        try:
            if p.emit_hint_event:
                await emit(
                    HintBlockEvent(
                        reply_id=reply_id,
                        block_id=hint.id,
                        source=hint.source,
                        hint=copy.deepcopy(hint.hint),
                    )
                )
            await next_handler()
        finally:
            if not p.persist_hint:
                _remove_block(agent.state.context, reply_id, hint.id)
