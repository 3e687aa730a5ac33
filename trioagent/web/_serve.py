"""``serve``: run an ASGI app (an :class:`AGUIApp`) with Hypercorn's trio worker.

Hypercorn runs on the caller's ``trio.run``: its connections are tasks of its nurseries, and a
request's task is the owner of the reply it serves.  A shutdown first interrupts every running
reply (each ends with its INTERRUPTED end on its stream, its partial answer saved) and only
then lets Hypercorn close the connections.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import trio

from ._app import AGUIApp

__all__ = ["serve"]


async def serve(
    app: AGUIApp,
    host: str = "127.0.0.1",
    port: int = 8000,
    *,
    shutdown_trigger: Callable[[], Awaitable[object]] | None = None,
    graceful_timeout: float = 5.0,
    access_log: bool = False,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``app`` on ``host:port`` until ``shutdown_trigger`` returns (or the call is
    cancelled); ``task_status.started`` gets the bound URLs (``port=0`` picks a free port).

    On the trigger the app's :meth:`~AGUIApp.shutdown` interrupts every running reply and waits
    for them (``app.shutdown_grace``); Hypercorn then closes what is left within
    ``graceful_timeout``.  A cancellation of this call is an outer cancellation of every
    reply: they still end INTERRUPTED with their partial answers saved.
    """
    from hypercorn.config import Config
    from hypercorn.trio import serve as hypercorn_serve

    config = Config()
    config.bind = [f"[{host}]:{port}" if ":" in host else f"{host}:{port}"]
    config.graceful_timeout = graceful_timeout
    config.accesslog = "-" if access_log else None
    # Hypercorn's own messages go to this package's logger: "Running on ..." at INFO (the
    # caller prints the URLs it gets), an application error at ERROR with its traceback.
    config.errorlog = logging.getLogger("trioagent.web")

    async def trigger() -> None:
        await (shutdown_trigger or trio.sleep_forever)()
        await app.shutdown()

    await hypercorn_serve(
        app,  # type: ignore[arg-type]  # hypercorn's ASGI types are TypedDicts
        config,
        shutdown_trigger=trigger,
        task_status=task_status,
    )
