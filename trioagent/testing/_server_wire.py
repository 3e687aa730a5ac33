"""HTTP/1.1 and SSE on one accepted connection of the loopback server (``trio`` + ``h11``).

:class:`Exchange` writes the answers: JSON bodies, OpenAI-style errors, files, raw custom
responses and Server-Sent Events, with the stalls and cuts a script asks for.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

import attrs
import h11
import trio

from .._core.json_types import JSONObject, JSONValue
from ._server_script import ScriptedError, ScriptedReply, ScriptedResponse

__all__ = ["Abort", "ClientGone", "Exchange"]


class ClientGone(Exception):
    """The client closed the connection while we were answering."""


class Abort(Exception):
    """The script asked to drop the connection."""


@attrs.frozen
class Exchange:
    """The socket and the h11 state of one connection, as the answers see them."""

    stream: trio.SocketStream
    conn: h11.Connection

    async def next_event(self) -> object:
        """The next h11 event of the request, reading from the socket as needed."""
        while True:
            event = self.conn.next_event()
            if event is not h11.NEED_DATA:
                return event
            data = await self.stream.receive_some(65536)
            self.conn.receive_data(data)  # b"" tells h11 the client closed its side

    async def send(self, event: h11.Event) -> None:
        data = self.conn.send(event)
        if data:
            await self.stream.send_all(data)

    async def send_json(
        self, status: int, payload: JSONValue, extra_headers: Mapping[str, str] | None = None
    ) -> None:
        body = json.dumps(payload).encode()
        headers = [
            ("Content-Type", "application/json"),
            ("Content-Length", str(len(body))),
            *(extra_headers or {}).items(),
        ]
        await self.send(h11.Response(status_code=status, headers=headers))
        await self.send(h11.Data(data=body))
        await self.send(h11.EndOfMessage())

    async def send_error(self, error: ScriptedError) -> None:
        """``{"error": {"message", "type", "param", "code"}}`` with the error's status."""
        headers = dict(error.headers)
        if error.retry_after is not None:
            headers["Retry-After"] = f"{error.retry_after:g}"
        payload = {
            "error": {
                "message": error.message,
                "type": error.type,
                "param": error.param,
                "code": error.code,
            }
        }
        await self.send_json(error.status, payload, headers)

    async def send_not_found(self) -> None:
        await self.send_error(ScriptedError(status=404, message="Not found", type="not_found"))

    async def send_file(self, data: bytes, media_type: str) -> None:
        headers = [("Content-Type", media_type), ("Content-Length", str(len(data)))]
        await self.send(h11.Response(status_code=200, headers=headers))
        await self.send(h11.Data(data=data))
        await self.send(h11.EndOfMessage())

    async def send_custom(self, answer: ScriptedResponse) -> None:
        """A custom route's answer: a whole body, or pieces sent chunked."""
        if not isinstance(answer, ScriptedResponse):
            raise TypeError(f"a route handler must return a ScriptedResponse, got {answer!r}")
        headers = [("Content-Type", answer.media_type), *answer.headers.items()]
        if isinstance(answer.body, bytes):
            headers.append(("Content-Length", str(len(answer.body))))
            pieces: Sequence[bytes] = [answer.body] if answer.body else []
        else:
            headers.append(("Transfer-Encoding", "chunked"))
            pieces = answer.body
        await self.send(h11.Response(status_code=answer.status, headers=headers))
        for sent, piece in enumerate(pieces):
            if answer.stall_after is not None and sent >= answer.stall_after:
                await trio.sleep_forever()
            await self.send(h11.Data(data=piece))
            if answer.chunk_delay:
                await trio.sleep(answer.chunk_delay)
        if answer.stall_after is not None:
            await trio.sleep_forever()
        await self.send(h11.EndOfMessage())

    async def start_sse(self) -> None:
        headers = [
            ("Content-Type", "text/event-stream; charset=utf-8"),
            ("Cache-Control", "no-cache"),
            ("Transfer-Encoding", "chunked"),
        ]
        await self.send(h11.Response(status_code=200, headers=headers))

    async def send_sse(
        self, events: Sequence[Mapping[str, JSONValue] | str], done: bool, delay: float
    ) -> None:
        """Raw events: objects as ``data: <json>``, text verbatim; then ``[DONE]`` if asked."""
        await self.start_sse()
        for item in events:
            text = item if isinstance(item, str) else f"data: {json.dumps(item)}\n\n"
            await self.send(h11.Data(data=text.encode()))
            if delay:
                await trio.sleep(delay)
        if done:
            await self.send(h11.Data(data=b"data: [DONE]\n\n"))
        await self.send(h11.EndOfMessage())

    async def send_stream(self, chunks: Sequence[JSONObject], reply: ScriptedReply) -> None:
        """A scripted reply's chunks as SSE, stalled or cut where the reply says."""
        await self.start_sse()
        for sent, chunk in enumerate(chunks):
            if reply.stall_after is not None and sent >= reply.stall_after:
                await trio.sleep_forever()
            if reply.cut_after is not None and sent >= reply.cut_after:
                if reply.cut_abruptly:
                    raise Abort  # closes the socket mid-body: an incomplete chunked read
                await self.send(h11.EndOfMessage())
                return
            await self.send(h11.Data(data=f"data: {json.dumps(chunk)}\n\n".encode()))
            if reply.chunk_delay:
                await trio.sleep(reply.chunk_delay)
        if reply.stall_after is not None:
            await trio.sleep_forever()
        await self.send(h11.Data(data=b"data: [DONE]\n\n"))
        await self.send(h11.EndOfMessage())
