"""``EmbeddingModelBase``: batching, concurrency, retries and caching for embedding models.

A provider implements one hook, :meth:`EmbeddingModelBase._call_api`, which embeds one batch.
The base class does the rest::

    response = await model(["Paris is in France.", TextBlock(text="Cats are mammals.")])
    response.embeddings  # one vector per input, in input order

* ``TextBlock`` inputs are unwrapped to their text; a ``DataBlock`` is accepted only by a model
  with ``supports_multimodal = True`` (a text-only model raises ``ValueError``; the knowledge
  base drops such inputs before they get here).
* The inputs are split into batches of ``batch_size``; the batches run concurrently in a nursery
  owned by the call (at most ``max_concurrency`` at a time).  The first failing batch cancels
  the others and its exception propagates as is (not wrapped in an exception group).
* Each batch is retried up to ``max_retries`` times when its error is retryable — by default a
  :class:`~trioagent.exception.ModelError` whose ``retryable`` flag is set (HTTP 429/408/409/5xx,
  connection errors, timeouts), waiting ``retry_delay`` seconds (or the provider's
  ``Retry-After``, capped at ``max_retry_delay``).  The sleep is a plain checkpoint:
  cancelling the call interrupts it.
* With a ``cache`` each batch is looked up before calling the provider and stored afterwards;
  the merged response says ``source="cache"`` only when every batch came from the cache.
"""

from __future__ import annotations

import builtins
import collections
import json
import logging
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import ClassVar, Literal, Self, TypeAlias

import attrs
import trio

from .._core.concurrency import reraise_unwrapped
from .._core.ids import generate_id, generate_timestamp
from .._core.json_types import JSONObject, JSONValue
from .._http import backoff_delay
from ..credential import CredentialBase
from ..exception import ModelError, ModelTimeoutError, ModelUpstreamError
from ..message import Base64Source, DataBlock, TextBlock

__all__ = [
    "EmbeddingCacheBase",
    "EmbeddingInput",
    "EmbeddingModelBase",
    "EmbeddingResponse",
    "EmbeddingUsage",
    "InMemoryEmbeddingCache",
]

logger = logging.getLogger("trioagent.rag")

#: What an embedding model embeds: text (``str`` or ``TextBlock``) or, for multimodal models,
#: a ``DataBlock``.
EmbeddingInput: TypeAlias = str | TextBlock | DataBlock
#: One batch as handed to :meth:`EmbeddingModelBase._call_api` (``TextBlock`` unwrapped).
BatchItem: TypeAlias = str | DataBlock


@attrs.define(kw_only=True)
class EmbeddingUsage:
    """What one embedding call cost: tokens (``None`` when the provider does not say) and
    seconds."""

    type: ClassVar[str] = "embedding"
    tokens: int | None = None
    time: float = 0.0


@attrs.define(kw_only=True)
class EmbeddingResponse:
    """The vectors of one call, in input order; ``source`` is ``"cache"`` when no provider
    call was needed."""

    type: ClassVar[str] = "embedding"
    embeddings: list[list[float]]
    id: str = attrs.field(factory=generate_id)
    created_at: str = attrs.field(factory=generate_timestamp)
    usage: EmbeddingUsage | None = None
    source: Literal["api", "cache"] = "api"


class EmbeddingCacheBase:
    """Stores the vectors of a batch under an identifier (a JSON-serializable object that
    names the model, its settings and the batch's inputs)."""

    async def store(
        self, embeddings: list[list[float]], identifier: JSONValue, overwrite: bool = False
    ) -> None:
        """Remember ``embeddings`` under ``identifier`` (kept unless ``overwrite``)."""
        raise NotImplementedError

    async def retrieve(self, identifier: JSONValue) -> list[list[float]] | None:
        """The vectors stored under ``identifier``, or ``None``."""
        raise NotImplementedError

    async def remove(self, identifier: JSONValue) -> None:
        """Forget ``identifier``."""
        raise NotImplementedError

    async def clear(self) -> None:
        """Forget everything."""
        raise NotImplementedError


def _cache_key(identifier: JSONValue) -> str:
    return json.dumps(identifier, sort_keys=True, ensure_ascii=False, default=str)


class InMemoryEmbeddingCache(EmbeddingCacheBase):
    """A process-local cache, least recently used entries evicted beyond ``max_entries``
    (``None``: unbounded)."""

    def __init__(self, max_entries: int | None = 1024) -> None:
        if max_entries is not None and max_entries < 1:
            raise ValueError("max_entries must be >= 1 or None")
        self.max_entries = max_entries
        self._entries: collections.OrderedDict[str, list[list[float]]] = collections.OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    async def store(
        self, embeddings: list[list[float]], identifier: JSONValue, overwrite: bool = False
    ) -> None:
        await trio.lowlevel.checkpoint()
        key = _cache_key(identifier)
        if key in self._entries and not overwrite:
            self._entries.move_to_end(key)
            return
        self._entries[key] = [list(v) for v in embeddings]
        self._entries.move_to_end(key)
        while self.max_entries is not None and len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)

    async def retrieve(self, identifier: JSONValue) -> list[list[float]] | None:
        await trio.lowlevel.checkpoint()
        key = _cache_key(identifier)
        found = self._entries.get(key)
        if found is None:
            return None
        self._entries.move_to_end(key)
        return [list(v) for v in found]

    async def remove(self, identifier: JSONValue) -> None:
        await trio.lowlevel.checkpoint()
        self._entries.pop(_cache_key(identifier), None)

    async def clear(self) -> None:
        await trio.lowlevel.checkpoint()
        self._entries.clear()


def _identify(item: BatchItem) -> JSONValue:
    """A JSON-able identity of one input (a data block by its source, not its block id)."""
    if isinstance(item, str):
        return item
    source = item.source
    if isinstance(source, Base64Source):
        return {"type": "data", "media_type": source.media_type, "data": source.data}
    return {"type": "data", "media_type": source.media_type, "url": source.url}


class EmbeddingModelBase:
    """Base class of embedding models.

    Args:
        model: the provider's model name.
        dimensions: the length of the vectors (required, > 0).  A legacy
            ``parameters["dimensions"]`` is promoted when ``dimensions`` is not given.
        credential: API key and base URL (providers that need one).
        parameters: extra provider request keys sent with every call.
        context_size: maximum input length in tokens per item (informational).
        batch_size: maximum number of items per provider call.
        max_retries: retries of a batch on a retryable error.
        retry_delay: seconds between retries (a provider's ``Retry-After`` wins).
        max_retry_delay: cap of one wait.
        max_concurrency: how many batches of one call run at the same time.
        cache: an :class:`EmbeddingCacheBase` consulted per batch.
        timeout: total deadline of one call in seconds, retries included
            (:class:`~trioagent.exception.ModelTimeoutError` when passed); ``None``: none.

    Subclasses implement :meth:`_call_api`; multimodal ones set ``supports_multimodal = True``.
    """

    type: ClassVar[str] = "embedding_model"
    #: Whether ``DataBlock`` inputs can be embedded.
    supports_multimodal: ClassVar[bool] = False

    def __init__(
        self,
        model: str,
        *,
        dimensions: int | None = None,
        credential: CredentialBase | None = None,
        parameters: Mapping[str, JSONValue] | None = None,
        context_size: int = 8191,
        batch_size: int = 2048,
        max_retries: int = 3,
        retry_delay: float = 1.0,
        max_retry_delay: float = 30.0,
        max_concurrency: int = 8,
        cache: EmbeddingCacheBase | None = None,
        timeout: float | None = None,
    ) -> None:
        params = dict(parameters or {})
        legacy = params.pop("dimensions", None)
        if dimensions is None:
            dimensions = legacy
        if dimensions is None:
            raise ValueError(f"{type(self).__name__} needs dimensions=<vector length>")
        if isinstance(dimensions, bool) or not isinstance(dimensions, int) or dimensions <= 0:
            raise ValueError(f"dimensions must be a positive integer, got {dimensions!r}")
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        if max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        if retry_delay < 0 or max_retry_delay < 0:
            raise ValueError("retry_delay and max_retry_delay must be >= 0")
        if max_concurrency < 1:
            raise ValueError("max_concurrency must be >= 1")
        if timeout is not None and timeout <= 0:
            raise ValueError("timeout must be > 0 or None")
        self.model = model
        self.dimensions: int = dimensions
        self.credential = credential
        self.parameters: JSONObject = params
        self.context_size = context_size
        self.batch_size = batch_size
        self.max_retries = max_retries
        self.retry_delay = retry_delay
        self.max_retry_delay = max_retry_delay
        self.max_concurrency = max_concurrency
        self.cache = cache
        self.timeout = timeout

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, dimensions={self.dimensions!r})"

    # -- lifecycle (providers with an HTTP client override aclose) -------------------------------

    async def aclose(self) -> None:
        """Release resources (nothing by default)."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: builtins.type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # -- provider hooks ---------------------------------------------------------------------------

    async def _call_api(self, batch: list[BatchItem], **kwargs: JSONValue) -> EmbeddingResponse:
        """Embed one batch (``len(batch) <= batch_size``; text as ``str``) and return one
        vector per item, in order."""
        raise NotImplementedError(f"{type(self).__name__} does not implement _call_api")

    def _is_retryable(self, exc: Exception) -> bool:
        """Whether a failed batch may be tried again; by default a retryable ``ModelError``."""
        return isinstance(exc, ModelError) and exc.retryable

    def _redact(self, text: str) -> str:
        return self.credential.redact(text) if self.credential is not None else text

    # -- the call ---------------------------------------------------------------------------------

    async def __call__(
        self, inputs: Sequence[EmbeddingInput], **kwargs: JSONValue
    ) -> EmbeddingResponse:
        """Embed ``inputs``; one vector per input, in input order.

        ``kwargs`` are extra request keys for this call (passed to :meth:`_call_api`).

        Raises:
            ValueError: a ``DataBlock`` given to a text-only model.
            TypeError: an input that is neither text nor a data block.
            ModelError: the provider failed (after the retries it allows).
            ModelTimeoutError: the total ``timeout`` passed.
        """
        items = [self._normalize(item) for item in inputs]
        if not items:
            return EmbeddingResponse(embeddings=[], usage=EmbeddingUsage(tokens=0, time=0.0))
        if self.timeout is None:
            return await self._embed(items, kwargs)
        try:
            with trio.fail_after(self.timeout):
                return await self._embed(items, kwargs)
        except trio.TooSlowError:
            raise ModelTimeoutError(
                f"embedding call to {self.model!r} did not finish within its total timeout "
                f"of {self.timeout}s",
                retryable=False,
            ) from None

    def _normalize(self, item: object) -> BatchItem:
        if isinstance(item, str):
            return item
        if isinstance(item, TextBlock):
            return item.text
        if isinstance(item, DataBlock):
            if not self.supports_multimodal:
                raise ValueError(
                    f"{type(self).__name__} embeds text only; got a DataBlock "
                    f"({item.source.media_type})"
                )
            return item
        raise TypeError(
            f"embedding inputs must be str, TextBlock or DataBlock, got {type(item).__name__}"
        )

    async def _embed(self, items: list[BatchItem], kwargs: JSONObject) -> EmbeddingResponse:
        batches = [items[i : i + self.batch_size] for i in range(0, len(items), self.batch_size)]
        if len(batches) == 1:
            return await self._call_batch(batches[0], kwargs)
        logger.info(
            "embedding %d inputs in %d batches (batch_size=%d) with %s",
            len(items),
            len(batches),
            self.batch_size,
            self.model,
        )
        results: list[EmbeddingResponse | None] = [None] * len(batches)
        limiter = trio.CapacityLimiter(self.max_concurrency)

        async def run(index: int) -> None:
            async with limiter:
                results[index] = await self._call_batch(batches[index], kwargs)

        try:
            async with trio.open_nursery() as nursery:
                for index in range(len(batches)):
                    nursery.start_soon(run, index)
        except BaseExceptionGroup as group:
            reraise_unwrapped(group)
        done = [r for r in results if r is not None]
        return _merge(done)

    def _cache_identifier(self, batch: list[BatchItem], kwargs: JSONObject) -> JSONValue:
        return {
            "model": self.model,
            "dimensions": self.dimensions,
            "parameters": self.parameters,
            "kwargs": kwargs,
            "inputs": [_identify(item) for item in batch],
        }

    async def _call_batch(self, batch: list[BatchItem], kwargs: JSONObject) -> EmbeddingResponse:
        """One batch: the cache, then the provider with retries."""
        identifier = None
        if self.cache is not None:
            identifier = self._cache_identifier(batch, kwargs)
            cached = await self.cache.retrieve(identifier)
            if cached is not None and len(cached) == len(batch):
                return EmbeddingResponse(
                    embeddings=cached, usage=EmbeddingUsage(tokens=0, time=0.0), source="cache"
                )
        attempt = 0
        while True:
            start = trio.current_time()
            try:
                response = await self._call_api(batch, **kwargs)
                break
            except Exception as exc:
                if not self._is_retryable(exc) or attempt >= self.max_retries:
                    raise
                delay = self._retry_delay_for(exc)
                logger.info(  # handled: if the retries run out, the error is raised
                    "embedding model %r failed: %s; retry %d of %d in %.2fs",
                    self.model,
                    exc,
                    attempt + 1,
                    self.max_retries,
                    delay,
                )
            attempt += 1
            await trio.sleep(delay)  # a plain checkpoint: cancelling the call interrupts it
        if len(response.embeddings) != len(batch):
            raise ModelUpstreamError(
                f"embedding model {self.model!r} returned {len(response.embeddings)} vectors "
                f"for {len(batch)} inputs",
                retryable=False,
            )
        if response.usage is None:
            response.usage = EmbeddingUsage(time=trio.current_time() - start)
        if self.cache is not None:
            await self.cache.store(response.embeddings, identifier)
        return response

    def _retry_delay_for(self, exc: Exception) -> float:
        """``retry_delay``, or the provider's ``Retry-After``; capped at ``max_retry_delay``."""
        retry_after = exc.retry_after if isinstance(exc, ModelError) else None
        return backoff_delay(
            0,
            retry_delay=self.retry_delay,
            max_retry_delay=self.max_retry_delay,
            retry_after=retry_after,
            exponential=False,
        )


def _merge(responses: list[EmbeddingResponse]) -> EmbeddingResponse:
    """Concatenate batch responses (in order): tokens summed (``None`` when no batch said),
    time = the longest batch (they ran concurrently), ``cache`` only if every batch was."""
    embeddings: list[list[float]] = []
    tokens: int | None = None
    elapsed = 0.0
    for response in responses:
        embeddings.extend(response.embeddings)
        usage = response.usage
        if usage is not None:
            elapsed = max(elapsed, usage.time)
            if usage.tokens is not None:
                tokens = (tokens or 0) + usage.tokens
    cached = all(r.source == "cache" for r in responses)
    return EmbeddingResponse(
        embeddings=embeddings,
        usage=EmbeddingUsage(tokens=tokens, time=elapsed),
        source="cache" if cached else "api",
    )
