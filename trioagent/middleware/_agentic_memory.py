"""``AgenticMemoryMiddleware``: file-backed long-term memory managed by the model itself.

The memory is a directory of Markdown files (``<workdir>/<memory_dir>``, ``Memory`` by
default) with an index, ``MEMORY.md`` (see :class:`trioagent.memory.MemoryDirectory`).  The
model writes the files itself with the usual file tools; the middleware

* appends the memory instructions and the (bounded) index to the system prompt
  (``on_system_prompt``), creating an empty ``MEMORY.md`` on first use;
* starts a background retrieval at the beginning of every reply (``on_reply``): a model picks
  the memory files useful for the user's input from a manifest of their frontmatter, and the
  picked files' contents become one hint;
* adds that hint to the reply's assistant message on the first reasoning step after the
  retrieval finished (``on_reasoning``).  It never waits for it: a reply that answers in one
  step usually gets no hint.

Concurrency: the retrieval runs in a nursery owned by this middleware's ``on_reply`` layer —
opened around ``await next_handler()`` — and is cancelled when the reply ends, so it never
outlives the reply.  Its handle lives in a context variable set for the duration of that
``on_reply`` call (``on_reasoning`` runs in the same task or a descendant of it), never on the
instance: one middleware can serve many concurrent agents, and each reply sees only its own
retrieval.

File I/O goes through a :class:`~trioagent.memory.MemoryBackend`; the default
:class:`~trioagent.memory.LocalBackend` does it off the event loop (``trio.Path`` /
``trio.to_thread``).
"""

from __future__ import annotations

import contextvars
import logging
import os
from typing import ClassVar

import attrs
import trio

from .._core.chain import Kwargs, NextHandler
from .._core.concurrency import reraise_unwrapped
from .._core.emit import Emit
from ..agent import AgentLike, ReplyItem
from ..memory import (
    DEFAULT_MEMORY_INSTRUCTIONS,
    DEFAULT_RETRIEVAL_INSTRUCTIONS,
    MEMORY_INDEX,
    LocalBackend,
    MemoryBackend,
    MemoryDirectory,
    MemoryFileHeader,
)
from ..message import HintBlock, Msg
from ..model import ChatModelBase, as_chat_model
from ._base import MiddlewareBase

__all__ = ["AgenticMemoryMiddleware"]

logger = logging.getLogger("trioagent.middleware")


def _retrieval_model(model: ChatModelBase | str | None) -> ChatModelBase | None:
    """A ``"provider:model"`` spec string becomes a model; the rest is validated as given."""
    return as_chat_model(model, "retrieval_model") if isinstance(model, str) else model


@attrs.define(eq=False)
class _Retrieval:
    """The background retrieval of one reply: owned by that reply's ``on_reply`` nursery."""

    agent: AgentLike
    result: str | None = None
    done: bool = False
    consumed: bool = False
    finished: trio.Event = attrs.Factory(trio.Event)


def _query_of(inputs: object) -> str | None:
    """``"<name>: <text>"`` per input message with text, newline-joined (``None``: none)."""
    if isinstance(inputs, Msg):
        msgs = [inputs]
    elif isinstance(inputs, list | tuple) and all(isinstance(m, Msg) for m in inputs):
        msgs = list(inputs)
    else:
        return None
    lines = [f"{m.name}: {text}" for m in msgs if (text := m.get_text_content()) is not None]
    return "\n".join(lines) or None


class AgenticMemoryMiddleware(MiddlewareBase):
    """Long-term memory as Markdown files the model manages itself.

    Args:
        workdir: the agent's working directory.
        memory_dir: the memory directory inside ``workdir`` (holds ``MEMORY.md``).
        parameters: an :class:`AgenticMemoryMiddleware.Parameters` (defaults when ``None``).
        backend: a :class:`~trioagent.memory.MemoryBackend` (a
            :class:`~trioagent.memory.LocalBackend` when ``None``).

    Hooks: ``on_system_prompt`` (instructions + the index), ``on_reply`` (starts the
    retrieval when ``parameters.retrieval_async``), ``on_reasoning`` (adds the finished
    retrieval's hint once).  The model needs file tools (e.g. ``Read``/``Write``) in its
    toolkit to manage the memory; the middleware contributes none.

    The retrieval is a task of a nursery owned by the reply's ``on_reply`` layer, found
    through a context variable, and cancelled when the reply ends (also when it parks); it is
    never shared between replies or agents.  A failing retrieval is logged and yields no hint.
    :meth:`wait_retrieval` lets a tool or an inner middleware wait for the hint
    deterministically.
    """

    @attrs.define(kw_only=True)
    class Parameters:
        """The tunable parameters.

        Attributes:
            memory_max_tokens: the index's token budget in the system prompt (estimated as
                UTF-8 bytes / 4); a longer index is cut and a truncation notice appended.
            memory_instructions: appended to the system prompt before the index;
                ``{memory_dir}`` is replaced by the memory directory (plain substitution,
                other braces stay as they are).
            retrieval_async: start a retrieval at the beginning of each reply.
            retrieval_model: the model choosing the files, or a ``"provider:model"`` spec string
                (``None``: the agent's model).
            retrieval_max_tokens_per_md: the token budget of each surfaced file.
            retrieval_max_files: how many files (newest first) the manifest lists at most.
            retrieval_max_tokens_per_frontmatter: how much of each file is read for its
                frontmatter (4 bytes per token).
            retrieval_instructions: the system prompt of the selection call.
        """

        memory_max_tokens: int = attrs.field(
            default=4_000, validator=attrs.validators.instance_of(int)
        )
        memory_instructions: str = attrs.field(
            default=DEFAULT_MEMORY_INSTRUCTIONS, validator=attrs.validators.instance_of(str)
        )
        retrieval_async: bool = attrs.field(
            default=True, validator=attrs.validators.instance_of(bool)
        )
        retrieval_model: ChatModelBase | None = attrs.field(
            default=None,
            converter=_retrieval_model,
            validator=attrs.validators.optional(attrs.validators.instance_of(ChatModelBase)),
        )
        retrieval_max_tokens_per_md: int = attrs.field(
            default=2_000, validator=attrs.validators.instance_of(int)
        )
        retrieval_max_files: int = attrs.field(
            default=200, validator=attrs.validators.instance_of(int)
        )
        retrieval_max_tokens_per_frontmatter: int = attrs.field(
            default=256, validator=attrs.validators.instance_of(int)
        )
        retrieval_instructions: str = attrs.field(
            default=DEFAULT_RETRIEVAL_INSTRUCTIONS, validator=attrs.validators.instance_of(str)
        )

    FILENAME_MEMORY_MD: ClassVar[str] = MEMORY_INDEX

    def __init__(
        self,
        *,
        workdir: str | os.PathLike[str],
        memory_dir: str = "Memory",
        parameters: AgenticMemoryMiddleware.Parameters | None = None,
        backend: MemoryBackend | None = None,
    ) -> None:
        if parameters is not None and not isinstance(parameters, self.Parameters):
            raise TypeError(
                "parameters must be an AgenticMemoryMiddleware.Parameters, got "
                f"{type(parameters).__name__}"
            )
        self.parameters = parameters if parameters is not None else self.Parameters()
        self.directory = MemoryDirectory(
            os.fspath(workdir), memory_dir, backend if backend is not None else LocalBackend()
        )
        # A context variable, not instance state: each on_reply call sets its own retrieval
        # for the code it runs (and resets it when it returns).
        self._retrieval: contextvars.ContextVar[_Retrieval | None] = contextvars.ContextVar(
            f"AgenticMemoryMiddleware-{id(self):x}", default=None
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}(memory_dir={self.memory_dir_path!r})"

    @property
    def workdir(self) -> str:
        return self.directory.workdir

    @property
    def memory_dir(self) -> str:
        return self.directory.memory_dir

    @property
    def backend(self) -> MemoryBackend:
        return self.directory.backend

    @property
    def memory_dir_path(self) -> str:
        """The memory directory (``join(workdir, memory_dir)`` in the backend's terms)."""
        return self.directory.path

    @property
    def memory_md_path(self) -> str:
        """The index file, ``<memory dir>/MEMORY.md``."""
        return self.directory.index_path

    async def ensure_layout(self) -> None:
        """Create an empty ``MEMORY.md`` (and so the directory) unless it exists."""
        await self.directory.ensure_layout()

    async def on_system_prompt(self, agent: AgentLike, current_prompt: str) -> str:
        section = await self.directory.prompt_section(
            self.parameters.memory_instructions, self.parameters.memory_max_tokens
        )
        return f"{current_prompt}\n\n{section}"

    async def on_reply(
        self,
        agent: AgentLike,
        input_kwargs: Kwargs,
        next_handler: NextHandler[ReplyItem],
        emit: Emit[ReplyItem],
    ) -> None:
        query = _query_of(input_kwargs.get("inputs")) if self.parameters.retrieval_async else None
        if not query:
            await next_handler()
            return
        retrieval = _Retrieval(agent)
        token = self._retrieval.set(retrieval)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._run_retrieval, retrieval, query)
                try:
                    await next_handler()
                finally:
                    # The reply is over (finished, parked, failed or cancelled): the retrieval
                    # must not outlive it.
                    nursery.cancel_scope.cancel()
        except BaseExceptionGroup as group:
            # The nursery wraps what the inner layers raised; hand outer layers the plain
            # exception (a Cancelled stays a Cancelled).
            reraise_unwrapped(group)
        finally:
            self._retrieval.reset(token)

    async def on_reasoning(
        self,
        agent: AgentLike,
        input_kwargs: Kwargs,
        next_handler: NextHandler[ReplyItem],
        emit: Emit[ReplyItem],
    ) -> None:
        retrieval = self._retrieval.get()
        if (
            retrieval is not None
            and retrieval.agent is agent
            and retrieval.done
            and not retrieval.consumed
        ):
            retrieval.consumed = True
            if retrieval.result:
                agent.state.append_context(agent.name, [HintBlock(hint=retrieval.result)])
        await next_handler()

    async def wait_retrieval(self, agent: object) -> None:
        """Wait until the retrieval of ``agent``'s current reply has ended (at once when there
        is none here).  Call it from a tool or an inner middleware during the reply to make the
        next reasoning step get the hint deterministically."""
        retrieval = self._retrieval.get()
        if retrieval is not None and retrieval.agent is agent:
            await retrieval.finished.wait()

    async def _run_retrieval(self, retrieval: _Retrieval, query: str) -> None:
        try:
            try:
                retrieval.result = await self.retrieve(retrieval.agent, query)
            except Exception as exc:  # best effort: no hint; Cancelled is not an Exception
                logger.warning(
                    "AgenticMemoryMiddleware: memory retrieval failed (%s: %s)",
                    type(exc).__name__,
                    exc,
                )
                retrieval.result = None
            retrieval.done = True
        finally:
            retrieval.finished.set()

    async def retrieve(self, agent: AgentLike, query: str) -> str | None:
        """Select the memory files useful for ``query`` (with ``retrieval_model``, or the
        agent's model) and return their contents as one hint text (``None``: no memory
        files, or none selected)."""
        p = self.parameters
        return await self.directory.retrieve(
            p.retrieval_model or agent.model,
            query,
            instructions=p.retrieval_instructions,
            max_files=p.retrieval_max_files,
            max_tokens_per_frontmatter=p.retrieval_max_tokens_per_frontmatter,
            max_tokens_per_file=p.retrieval_max_tokens_per_md,
        )

    async def list_memory_files(self) -> list[MemoryFileHeader]:
        """The memory files (every ``.md`` below the memory directory except the index),
        newest first, at most ``retrieval_max_files``."""
        return await self.directory.list_files(
            self.parameters.retrieval_max_files,
            self.parameters.retrieval_max_tokens_per_frontmatter,
        )

    format_manifest = staticmethod(MemoryDirectory.format_manifest)
