"""Serving an agent to a browser: AG-UI over SSE from an ASGI app that runs under Trio.

* :class:`AGUIApp` -- the ASGI application: one agent (or a pipeline:
  :meth:`AGUIApp.for_pipeline`), one conversation per AG-UI ``threadId`` in a session store,
  Stop and human-in-the-loop round trips, a chat page.
* :func:`serve` -- run it with Hypercorn's trio worker (``trioagent serve`` on the command line).
* :class:`StopBus`, :class:`RedisStopBus` -- Stop requests that reach every server process.
* :class:`AGUIRun` -- the event mapping of one run (for another transport).

Needs the ``web`` extra: ``pip install 'trioagent[web]'``; without it, importing this package
raises :class:`~trioagent.exception.MissingExtraError` naming that command.
"""

from ..exception import MissingExtraError

try:
    import ag_ui as _ag_ui  # noqa: F401  (only: is the extra installed?)
    import hypercorn as _hypercorn  # noqa: F401
except ImportError as exc:
    raise MissingExtraError("trioagent.web", "web", module=exc.name or "ag_ui") from exc

from ._agui import AGUIRun as AGUIRun
from ._app import AGUIApp as AGUIApp
from ._serve import serve as serve
from ._served import MakeAgent as MakeAgent, MakePipeline as MakePipeline
from ._stop import RedisStopBus as RedisStopBus, StopBus as StopBus

__all__ = ["AGUIApp", "AGUIRun", "MakeAgent", "MakePipeline", "RedisStopBus", "StopBus", "serve"]
