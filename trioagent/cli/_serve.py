"""``trioagent serve``: the agent of ``trioagent chat`` served to a browser over AG-UI.

One :class:`~trioagent.web.AGUIApp` under Hypercorn's trio worker, with the built-in chat page
at ``/``.  The model is chosen as in ``chat`` (``--model``; without it the embedded demo model
answers offline, and its ``get_time`` tool asks the page for confirmation).  ``--store`` keeps
the threads: a SQLite file (the default, in the user's data directory) or ``redis://...`` --
then Stop requests travel over Redis too, so several server processes serve the same threads.

Ctrl-C (or SIGTERM) shuts down: every running reply is interrupted first (its stream ends with
RUN_FINISHED ``cancelled``, its partial answer is saved), then the server exits.
"""

from __future__ import annotations

import contextlib
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import TextIO

import attrs
import trio

from ..agent import Agent
from ..middleware import MiddlewareBase
from ..model import ChatModelBase, chat_model_from_spec
from ..permission import PermissionDecision
from ..session import RedisSessionStore, SessionStore, SessionStoreError, SQLiteSessionStore
from ..testing import (
    OpenAICompatibleServer,
    RecordedRequest,
    ScriptedReply,
    serve_openai_compatible,
)
from ..tool import Toolkit
from ..web import AGUIApp, RedisStopBus, serve
from ._chat import (
    EMBEDDED,
    STORY,
    ChatOptions,
    ChatSetupError,
    check_reachable,
    data_dir,
    demo_reply,
    get_time,
    resolve_credential,
)

__all__ = ["ServeOptions", "run_serve"]

#: The embedded demo server's script is topped up with this many answers when it runs low.
DEMO_BATCH = 64
THOUGHT = "A story, then: one about a reply that is cancelled and loses nothing."


@attrs.define(kw_only=True)
class ServeOptions:
    """What ``trioagent serve`` was asked for."""

    model: str = EMBEDDED
    base_url: str | None = None
    system_prompt: str = "You are a helpful, concise assistant."
    host: str = "127.0.0.1"
    port: int = 8000
    #: A SQLite file path or a ``redis://`` / ``rediss://`` / ``unix://`` URL; ``None``: the
    #: SQLite file in the user's data directory.
    store: str | None = None
    access_log: bool = False


def _toolkit() -> Toolkit:
    toolkit = Toolkit()
    # The page confirms tool calls, so the demo's one tool asks (the REPL's is allowed).
    toolkit.register_function(
        get_time, permission=PermissionDecision(behavior="ask", message="reads the clock")
    )
    return toolkit


def serve_demo_reply(request: RecordedRequest) -> ScriptedReply:
    """The demo of ``chat``, whose story also streams a short thought first (the page shows
    thinking)."""
    reply = demo_reply(request)
    if reply.text == STORY:
        return attrs.evolve(reply, reasoning=THOUGHT)
    return reply


def _is_redis(store: str) -> bool:
    return store.startswith(("redis://", "rediss://", "unix://"))


async def open_store(
    stack: contextlib.AsyncExitStack, spec: str | None
) -> tuple[SessionStore, RedisStopBus | None]:
    """The store ``--store`` names, and the Stop bus that goes with a Redis store (both
    closed by ``stack``)."""
    bus = None
    if spec is not None and _is_redis(spec):
        store: SessionStore = await stack.enter_async_context(RedisSessionStore(spec))
        bus = await stack.enter_async_context(RedisStopBus(spec))
    else:
        store = SQLiteSessionStore(spec or data_dir() / "web-sessions.sqlite3")
    try:
        await store.list()  # unreachable or unusable: one line now, not on every request
    except (SessionStoreError, OSError) as exc:  # a SQLite path that cannot be created
        raise ChatSetupError(f"--store: {exc}") from None
    return store, bus


async def run_serve(
    options: ServeOptions,
    out: TextIO | None = None,
    *,
    shutdown_trigger: trio.Event | None = None,
    task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED,
) -> int:
    """Serve until SIGINT/SIGTERM (or ``shutdown_trigger``); ``task_status`` gets the URL.

    Raises :class:`ChatSetupError` for set-up problems (bad ``--model``, missing key,
    unreachable model server).
    """
    out = out if out is not None else sys.stdout
    real: ChatModelBase | None = None
    if options.model != EMBEDDED:
        spec, credential = resolve_credential(
            ChatOptions(model=options.model, base_url=options.base_url)
        )
        await check_reachable(credential.get_base_url())
        real = chat_model_from_spec(spec, credential=credential, max_retries=1, retry_delay=0.5)
    async with trio.open_nursery() as nursery:
        demo: OpenAICompatibleServer | None = None
        if real is None:
            demo = await nursery.start(serve_openai_compatible, [])
            model: ChatModelBase = demo.chat_model("trioagent-demo")
        else:
            model = real
        toolkit = _toolkit()

        def make_agent(first: list[MiddlewareBase]) -> Agent:
            if demo is not None and len(demo.script) < DEMO_BATCH:
                demo.push(*[serve_demo_reply] * DEMO_BATCH)
            return Agent("assistant", options.system_prompt, model, toolkit, middlewares=first)

        async with model, contextlib.AsyncExitStack() as stack:
            store, bus = await open_store(stack, options.store)
            app = AGUIApp(make_agent, store, stop_bus=bus)
            async with trio.open_nursery() as serving:
                await serving.start(app.run)

                async def run_server(task_status: trio.TaskStatus[list[str]]) -> None:
                    await serve(
                        app,
                        options.host,
                        options.port,
                        shutdown_trigger=_trigger(shutdown_trigger),
                        access_log=options.access_log,
                        task_status=task_status,
                    )
                    serving.cancel_scope.cancel()  # the Stop listener

                url = (await serving.start(run_server))[0]
                where = "the embedded demo model (offline)" if real is None else options.model
                out.write(f"trioagent serve: {url}/ (chat page) with {where}; Ctrl-C stops\n")
                out.flush()
                task_status.started(url)
        nursery.cancel_scope.cancel()  # the demo model's server
    return 0


def _trigger(event: trio.Event | None) -> Callable[[], Awaitable[None]]:
    async def wait() -> None:
        if event is not None:
            await event.wait()
            return
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async for _ in signals:
                return

    return wait
