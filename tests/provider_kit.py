"""Loopback plumbing shared by the provider model tests (not a test module).

The provider model tests (``test_*_model.py``) talk to ``serve_openai_compatible`` over real
sockets; providers whose wire protocol is not OpenAI's answer through custom routes that
replay scripted bodies (SSE or NDJSON transcripts).  What every provider needs is here: the
server, a scripted route, the emitted-chunk recorder, the cancel-mid-stream call and a one-tool
agent.  Transcripts, credentials and model builders stay in each provider's module.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import httpcore2
import httpx2
import trio

from trioagent.agent import Agent, InjectionConfig
from trioagent.message import Msg, SystemMsg, TextBlock, UserMsg
from trioagent.model import ChatModelBase, ChatResponse
from trioagent.permission import PermissionDecision
from trioagent.testing import (
    OpenAICompatibleServer,
    RecordedRequest,
    ScriptedResponse,
    serve_openai_compatible,
)
from trioagent.tool import Toolkit

MSGS: list[Msg] = [SystemMsg("system", "Be brief."), UserMsg("user", "Weather in Paris?")]


async def start_server(nursery: trio.Nursery, api_key: str | None = None) -> OpenAICompatibleServer:
    """A loopback server in ``nursery``; with ``api_key`` it answers 401 to other keys."""
    server: OpenAICompatibleServer = await nursery.start(
        partial(serve_openai_compatible, api_key=api_key)
    )
    return server


def event_stream(pieces: Sequence[bytes], **kwargs: Any) -> ScriptedResponse:
    """A ``text/event-stream`` answer sent piece by piece (``kwargs`` go to the response:
    ``stall_after``, ``chunk_delay``, ...)."""
    return ScriptedResponse(body=pieces, media_type="text/event-stream", **kwargs)


def replay(server: OpenAICompatibleServer, path: str, transcript: Sequence[str]) -> None:
    """Answer every ``POST path`` with ``transcript`` (SSE text, one piece per item)."""

    def handler(request: RecordedRequest) -> ScriptedResponse:
        return event_stream([line.encode() for line in transcript])

    server.add_route("POST", path, handler)


class ScriptedRoute:
    """``POST`` routes of a loopback server answering from a script, in order.

    Subclasses add the provider's model builder and may override :meth:`answer` (a key check,
    a default answer) or :attr:`requests`.
    """

    def __init__(self, server: OpenAICompatibleServer, *paths: str) -> None:
        self.server = server
        self.paths = paths
        self.script: collections.deque[ScriptedResponse] = collections.deque()
        for path in paths:
            server.add_route("POST", path, self.answer)

    def push(self, *answers: ScriptedResponse) -> None:
        self.script.extend(answers)

    def answer(self, request: RecordedRequest) -> ScriptedResponse:
        return self.script.popleft()

    @property
    def requests(self) -> list[RecordedRequest]:
        """The requests to these routes, in order."""
        return [r for r in self.server.requests if r.path.split("?")[0] in self.paths]


class Sink:
    """An ``emit`` callback that keeps every chunk."""

    def __init__(self) -> None:
        self.items: list[ChatResponse] = []

    async def __call__(self, chunk: ChatResponse) -> None:
        self.items.append(chunk)


def open_connections(client: httpx2.AsyncClient) -> list[httpcore2.AsyncConnectionInterface]:
    """The connections in the client's httpx2 pool, open or idle.

    This is the one place the tests read httpx2's private ``_transport._pool``, on purpose: it
    is the only way to assert that a cancelled or finished call's connection was closed (or
    pooled idle) rather than left busy.
    """
    return list(client._transport._pool.connections)  # type: ignore[attr-defined]


async def call_cancelled_after(
    model: ChatModelBase, chunks: int, msgs: list[Msg] = MSGS
) -> tuple[Sink, list[BaseException]]:
    """Call ``model`` streaming and cancel the call once it has emitted ``chunks`` chunks.

    Returns what was emitted (the interrupted final chunk last) and what the call raised.
    """
    sink = Sink()
    caught: list[BaseException] = []

    async def emit(chunk: ChatResponse) -> None:
        await sink(chunk)
        if len(sink.items) == chunks:
            scope.cancel()

    with trio.CancelScope() as scope:
        try:
            await model(msgs, emit=emit)
        except BaseException as exc:
            caught.append(exc)
            raise
    return sink, caught


def agent_with_tool(model: ChatModelBase, tool: Callable[..., Any]) -> Agent:
    """An agent ("assistant", system prompt "Be brief.", no runtime-state injection) on
    ``model`` whose one tool, the function ``tool``, is always allowed."""
    toolkit = Toolkit()
    toolkit.register_function(tool, permission=PermissionDecision(behavior="allow", message="ok"))
    return Agent(
        "assistant",
        "Be brief.",
        model,
        toolkit=toolkit,
        injection_config=InjectionConfig(inject_runtime_state=False),
    )


def lookup_agent(model: ChatModelBase, seen: list[str] | None = None) -> Agent:
    """:func:`agent_with_tool` with ``lookup(city)`` -> ``"sunny in <city>"``; each city
    looked up is appended to ``seen``."""

    async def lookup(city: str) -> str:
        """Look up the weather.

        Args:
            city: the city.
        """
        if seen is not None:
            seen.append(city)
        return f"sunny in {city}"

    return agent_with_tool(model, lookup)


# -- OpenAI stream chunks and what a call returned -------------------------------------------
NO_NET_DEADLINE: dict[str, Any] = {"read_timeout": None, "connect_timeout": None}


def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "id": "chatcmpl-edge",
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        **extra,
    }


ROLE = chunk({"role": "assistant", "content": ""})
USAGE = {
    "id": "chatcmpl-edge",
    "choices": [],
    "usage": {"prompt_tokens": 3, "completion_tokens": 1},
}


def response_texts(items: Sequence[ChatResponse]) -> list[str]:
    return [b.text for c in items for b in c.content if isinstance(b, TextBlock)]


def text_of(response: ChatResponse) -> str:
    return "".join(response_texts([response]))


def busy(model: ChatModelBase) -> list[Any]:
    """Pooled connections that are neither idle (reusable) nor closed."""
    return [c for c in open_connections(model.http_client) if not (c.is_idle() or c.is_closed())]
