"""Wrap a plain Python function as a tool: :class:`FunctionTool`."""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Awaitable, Callable, Generator
from typing import cast

import trio

from .._core.copying import deep_copy
from .._core.json_types import JSONObject, JSONValue
from ..exception import ToolInputValidationError
from ..permission import PermissionBehavior, PermissionContext, PermissionDecision
from ._base import ToolBase, ToolMiddlewareBase
from ._docstring import parse_docstring
from ._hints import callable_docstring, callable_name
from ._response import Emit, ToolChunk, chunk_from_value
from ._schema import remove_title_field
from ._shape import ConversionError
from ._signature import ToolParameters

__all__ = ["FunctionTool"]


class FunctionTool(ToolBase):
    """A tool made from a function, with its schema read from the signature and docstring.

    **Schema.** ``name`` defaults to the function's name, ``description`` to its docstring
    (the text before the ``Args:``-like sections), ``input_schema`` to the schema of its
    parameters (:mod:`trioagent.tool._shape`; Google, NumPy and reST docstrings give the
    parameter descriptions).  ``emit``, ``_agent_state``, ``self``/``cls`` and
    ``*args``/``**kwargs`` are not part of the schema.  An explicit ``input_schema`` may be a
    dict or a pydantic model class.

    **Calling.** Arguments arrive as JSON values and are converted to the annotated types first,
    by the same walk of the annotations that made the schema: attrs classes (read by field
    alias, as the schema shows them), dataclasses, enums, literals and pydantic models — also
    inside lists, tuples, sets, dicts (non-string keys too) and unions, whose members are tried
    in declaration order — and ``2.0`` for an ``int``.  A mismatch is a
    :class:`~trioagent.exception.ToolInputValidationError` naming each bad value's JSON path;
    the function is not called.  Async functions are awaited.  Sync
    functions run inline in the event loop — keep them quick — or, with ``blocking=True``, in a
    worker thread via :func:`trio.to_thread.run_sync` (cancellation then waits for the thread
    to finish, since threads cannot be interrupted).

    **Streaming.** Declare a parameter named ``emit``:

    * async function: ``await emit(ToolChunk(...))`` — delivered immediately;
    * sync function with ``blocking=True``: ``emit(chunk)`` — delivered immediately from the
      worker thread;
    * sync inline function: ``emit(chunk)`` — buffered and delivered right after it returns.

    A sync *generator* function streams too: each yielded value becomes one chunk.  Async
    generator functions are rejected (no async generators in a Trio program's tool path: they
    cannot be cleaned up deterministically) — use ``emit``.

    **Return value** → the final chunk: ``None`` (nothing), a :class:`ToolChunk` (as is), a
    ``str`` (one text block), a ``TextBlock`` / ``DataBlock`` or a non-empty list of them, an
    attrs instance or any JSON-serializable value (``json.dumps(..., ensure_ascii=False)``,
    falling back to ``str()``).  A returned :class:`ToolResponse` is the final result as is
    (emitted as one chunk if the function emitted nothing).

    **Permission.** ``permission`` is the decision :meth:`check_permissions` returns; without
    it the user is asked (``"Custom function tools must be explicitly allowed by the user."``).
    """

    def __init__(
        self,
        func: Callable[..., object],
        name: str | None = None,
        description: str | None = None,
        input_schema: JSONObject | type | None = None,
        is_concurrency_safe: bool = True,
        is_read_only: bool = False,
        is_state_injected: bool = False,
        middlewares: list[ToolMiddlewareBase] | None = None,
        permission: PermissionDecision | None = None,
        *,
        is_background: bool = False,
        background_after: float | None = None,
        metadata_schema: JSONObject | None = None,
        blocking: bool = False,
    ) -> None:
        if not callable(func):
            raise TypeError(f"FunctionTool needs a callable, got {type(func).__name__}")
        if inspect.isasyncgenfunction(func) or inspect.isasyncgenfunction(
            getattr(func, "__call__", None)  # noqa: B004 - callable objects
        ):
            raise TypeError(
                f"{callable_name(func)} is an async generator function; tools stream by "
                "declaring an `emit` parameter and calling `await emit(ToolChunk(...))`"
            )
        if is_state_injected and (is_background or background_after is not None):
            raise ValueError("a tool with is_state_injected=True cannot run in the background")
        super().__init__(
            middlewares, is_background=is_background, background_after=background_after
        )
        self.name = name if name is not None else callable_name(func)
        self.validate_name(f"pass name=... (for example name={_suggested_name(self.name)!r})")
        self.description = (
            description if description is not None else _description(callable_docstring(func))
        )
        # With an explicit schema, a parameter whose type has no JSON form gets the JSON value.
        self._parameters = ToolParameters(func, strict=input_schema is None)
        if input_schema is None:
            self.input_schema = self._parameters.schema()
        elif isinstance(input_schema, dict):
            self.input_schema = input_schema
        elif callable(getattr(input_schema, "model_json_schema", None)):
            self.input_schema = remove_title_field(input_schema.model_json_schema())  # type: ignore[attr-defined]
        else:
            raise TypeError("input_schema must be a JSON schema dict or a pydantic model class")
        self.validate_schema()
        self.is_concurrency_safe = is_concurrency_safe
        self.is_read_only = is_read_only
        self.is_state_injected = is_state_injected
        self.metadata_schema = metadata_schema
        self.blocking = blocking
        self._func = func
        self._permission = permission
        self._is_async = inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(
            getattr(func, "__call__", None)  # noqa: B004 - callable objects
        )
        self._wants_emit = "emit" in inspect.signature(func).parameters

    @property
    def func(self) -> Callable[..., object]:
        """The wrapped function."""
        return self._func

    async def check_permissions(
        self, tool_input: JSONObject, context: PermissionContext
    ) -> PermissionDecision:
        """The ``permission`` given at construction (a copy), else ASK."""
        if self._permission is not None:
            return deep_copy(self._permission)
        return PermissionDecision(
            behavior=PermissionBehavior.ASK,
            message="Custom function tools must be explicitly allowed by the user.",
        )

    async def call(self, emit: Emit, /, **kwargs: JSONValue) -> object:
        """Invoke the function (see the class docstring for the calling conventions)."""
        kwargs = self._structure(kwargs)
        buffered: list[ToolChunk] = []
        if self._wants_emit:
            kwargs["emit"] = self._emit_for(emit, buffered)
        if self._is_async:
            result = await cast(Awaitable[object], self._func(**kwargs))
        elif self.blocking:
            result = await trio.to_thread.run_sync(functools.partial(self._func, **kwargs))
        else:
            try:
                result = self._func(**kwargs)
            except Exception:
                for chunk in buffered:  # what it streamed before failing still counts
                    await emit(chunk)
                raise
            for chunk in buffered:
                await emit(chunk)
            buffered.clear()
            if inspect.isawaitable(result):
                result = await result
        for chunk in buffered:
            await emit(chunk)
        if isinstance(result, Generator):
            await self._drain(result, emit)
            return None
        return result

    def _emit_for(self, emit: Emit, buffered: list[ToolChunk]) -> Callable[[ToolChunk], object]:
        if self._is_async:
            return emit
        if self.blocking:

            def emit_from_thread(chunk: ToolChunk) -> None:
                trio.from_thread.run(emit, chunk)

            return emit_from_thread
        return buffered.append

    async def _drain(self, generator: Generator[object, None, object], emit: Emit) -> None:
        """Emit every item of a sync generator (stepped in a thread when ``blocking``)."""
        done = object()
        try:
            while True:
                if self.blocking:
                    item = await trio.to_thread.run_sync(next, generator, done)
                else:
                    item = next(generator, done)
                if item is done:
                    return
                chunk = chunk_from_value(item)
                if chunk is not None:
                    await emit(chunk)
        finally:
            generator.close()

    def _structure(self, kwargs: JSONObject) -> JSONObject:
        """The arguments converted to the annotated types (see the class docstring).

        Raises:
            ToolInputValidationError: every argument that does not fit, with its JSON path.
        """
        try:
            return self._parameters.convert(kwargs)
        except ConversionError as exc:
            raise ToolInputValidationError(
                f"Input validation failed for tool '{self.name}': {exc}"
            ) from None


def _suggested_name(name: object) -> str:
    """A name like ``name`` that providers accept (``"my_tool"`` for ``"my tool"``)."""
    cleaned = re.sub(r"[^a-zA-Z0-9_-]+", "_", str(name)).strip("_")[:64]
    return cleaned if cleaned and cleaned != "lambda" else "my_tool"


def _description(docstring: str) -> str:
    return parse_docstring(docstring).description
