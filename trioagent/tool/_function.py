"""Wrap a plain Python function as a tool: :class:`FunctionTool`."""

from __future__ import annotations

import functools
import inspect
import logging
import re
import warnings
from collections.abc import Awaitable, Callable, Generator
from typing import Literal, cast

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
from ._worker import ThreadCall, ThreadRunner, check_picklable, run_in_process

__all__ = ["FunctionTool"]

logger = logging.getLogger("trioagent.tool")


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
    the function is not called.  Async functions are awaited.

    **Sync functions never run on the event loop.**  By default (``isolate="thread"``) each
    call runs in a worker thread (:func:`trio.to_thread.run_sync`, abandoned on cancel): a
    cancelled call ends at once, and a thread still running is abandoned -- it runs to its
    end, its result is discarded, its side effects happen; a WARNING names the tool and the
    call, and :attr:`abandoned_threads` counts it until it ends.  With ``isolate="process"``
    each call runs in a fresh worker process that a cancellation kills (SIGKILL): for sync
    work that must stop when the reply does.  The function must then be picklable (a
    top-level function), take no ``emit`` and not be a generator; its arguments and result
    are pickled.  ``blocking=`` is deprecated and ignored (sync functions always run off the
    event loop now).

    **Streaming.** Declare a parameter named ``emit``:

    * async function: ``await emit(ToolChunk(...))`` — delivered immediately;
    * sync function: ``emit(chunk)`` — delivered immediately from the worker thread (dropped
      once the call was cancelled and its thread abandoned).

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
        blocking: bool | None = None,
        isolate: Literal["thread", "process"] = "thread",
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
        self._func = func
        self._permission = permission
        self._is_async = inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(
            getattr(func, "__call__", None)  # noqa: B004 - callable objects
        )
        self._wants_emit = "emit" in inspect.signature(func).parameters
        if blocking is not None:
            warnings.warn(
                f"{self.name}: blocking= is deprecated and ignored: a sync function tool "
                "always runs in a worker thread now (isolate='process' runs it in a process "
                "that a cancellation kills)",
                DeprecationWarning,
                stacklevel=3,
            )
        if isolate not in ("thread", "process"):
            raise ValueError(f"isolate must be 'thread' or 'process', got {isolate!r}")
        self.isolate = isolate
        if isolate == "process":
            self._check_isolable(is_state_injected)
        self._threads = ThreadRunner(self.name)

    def _check_isolable(self, is_state_injected: bool) -> None:
        """Refuse what a worker process cannot run (naming the function)."""
        func, name = self._func, callable_name(self._func)
        if self._is_async or inspect.isgeneratorfunction(func):
            raise TypeError(
                f"{name}: isolate='process' is for plain sync functions (not async, not a "
                "generator)"
            )
        if self._wants_emit or is_state_injected:
            raise TypeError(
                f"{name}: a tool run with isolate='process' cannot take `emit` or the agent "
                "state (they do not cross into another process)"
            )
        check_picklable(func, name)

    @property
    def abandoned_threads(self) -> int:
        """Worker threads of cancelled calls of this tool that are still running."""
        return self._threads.abandoned

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
        if self.isolate == "process":
            return await run_in_process(self._func, kwargs, self.name)
        thread_call = self._threads.new_call()
        if self._is_async:
            if self._wants_emit:
                kwargs["emit"] = emit
            result = await cast(Awaitable[object], self._func(**kwargs))
        else:
            if self._wants_emit:
                kwargs["emit"] = _emit_from_thread(emit, thread_call)
            result = await self._threads.run(functools.partial(self._func, **kwargs), thread_call)
        if inspect.isawaitable(result):
            result = await result
        if isinstance(result, Generator):
            await self._drain(result, emit, thread_call)
            return None
        return result

    async def _drain(
        self, generator: Generator[object, None, object], emit: Emit, thread_call: ThreadCall
    ) -> None:
        """Emit every item of a sync generator, each step in a worker thread."""
        done = object()
        try:
            while True:
                item = await self._threads.run(
                    functools.partial(next, generator, done), thread_call
                )
                if item is done:
                    return
                chunk = chunk_from_value(item)
                if chunk is not None:
                    await emit(chunk)
        finally:
            if not thread_call.abandoned:  # an abandoned step still runs the generator
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


def _emit_from_thread(emit: Emit, thread_call: ThreadCall) -> Callable[[ToolChunk], None]:
    """The ``emit`` a sync function calls from its worker thread: delivers the chunk in the
    event loop and waits for it; drops it once the call gave up on the thread."""

    def emit_from_thread(chunk: ToolChunk) -> None:
        if thread_call.abandoned:
            logger.debug("dropping a chunk emitted by an abandoned worker thread")
            return
        trio.from_thread.run(emit, chunk)

    return emit_from_thread


def _suggested_name(name: object) -> str:
    """A name like ``name`` that providers accept (``"my_tool"`` for ``"my tool"``)."""
    cleaned = re.sub(r"[^a-zA-Z0-9_-]+", "_", str(name)).strip("_")[:64]
    return cleaned if cleaned and cleaned != "lambda" else "my_tool"


def _description(docstring: str) -> str:
    return parse_docstring(docstring).description
