"""The Chat Completions JSON the loopback server sends: streamed chunks, whole completions,
usage, and the check of a request body."""

from __future__ import annotations

import json
import time

from .._core.json_types import JSONObject, JSONValue
from ._server_script import RecordedRequest, ScriptedError, ScriptedReply

__all__ = ["completion", "model_entry", "model_list", "request_problem", "stream_chunks"]


def _fragments(text: str, size: int) -> list[str]:
    size = max(1, size)
    return [text[i : i + size] for i in range(0, len(text), size)]


def _usage(request: RecordedRequest, reply: ScriptedReply) -> JSONObject:
    if reply.usage is not None:
        return dict(reply.usage)
    prompt = len(json.dumps(request.body.get("messages", []))) // 4 + 1
    produced = reply.text + reply.reasoning + "".join(c.arguments for c in reply.tool_calls)
    completion = len(produced) // 4 + 1
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def _finish_reason(reply: ScriptedReply) -> str:
    return reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")


def stream_chunks(
    request: RecordedRequest, reply: ScriptedReply, default_model: str
) -> list[JSONObject]:
    options = request.body.get("stream_options")
    include_usage = isinstance(options, dict) and bool(options.get("include_usage"))
    base = {
        "id": reply.id,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": reply.model or request.body.get("model") or default_model,
    }

    def chunk(delta: JSONObject, finish: str | None = None) -> JSONObject:
        out = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        if include_usage:
            out["usage"] = None
        return out

    chunks = [chunk({"role": "assistant", "content": ""})]
    chunks += [
        chunk({"reasoning_content": f}) for f in _fragments(reply.reasoning, reply.chunk_size)
    ]
    chunks += [chunk({"content": f}) for f in _fragments(reply.text, reply.chunk_size)]
    for index, call in enumerate(reply.tool_calls):
        opening = {
            "index": index,
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": ""},
        }
        chunks.append(chunk({"tool_calls": [opening]}))
        for fragment in _fragments(call.arguments, reply.chunk_size):
            chunks.append(
                chunk({"tool_calls": [{"index": index, "function": {"arguments": fragment}}]})
            )
    chunks.append(chunk({}, _finish_reason(reply)))
    if include_usage:
        chunks.append({**base, "choices": [], "usage": _usage(request, reply)})
    return chunks


def completion(request: RecordedRequest, reply: ScriptedReply, default_model: str) -> JSONObject:
    message: JSONObject = {"role": "assistant", "content": reply.text or None}
    if reply.reasoning:
        message["reasoning_content"] = reply.reasoning
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for call in reply.tool_calls
        ]
    return {
        "id": reply.id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": reply.model or request.body.get("model") or default_model,
        "choices": [{"index": 0, "message": message, "finish_reason": _finish_reason(reply)}],
        "usage": _usage(request, reply),
    }


def request_problem(body: JSONValue) -> ScriptedError | None:
    """The HTTP 400 a chat-completions body gets, or ``None`` for a body the server answers.

    ``n`` other than 1 is refused as llama.cpp's server refuses it (the script holds one
    answer per request), with ``param: "n"`` as OpenAI names the offending parameter.
    """
    if not isinstance(body, dict) or "messages" not in body:
        return _invalid("The body must be a JSON object with 'messages'.")
    messages = body["messages"]
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        return _invalid("'messages' must be a list of objects.")
    options = body.get("stream_options")
    if options is not None and not isinstance(options, dict):
        return _invalid("'stream_options' must be an object.")
    n = body.get("n")
    if n is not None and (not isinstance(n, int) or isinstance(n, bool) or n < 1):
        return _invalid(f"Invalid 'n': expected an integer >= 1, got {n!r}.", param="n")
    if n is not None and n > 1:
        return _invalid("Only one completion choice is allowed ('n' must be 1).", param="n")
    return None


def _invalid(message: str, *, param: str | None = None) -> ScriptedError:
    return ScriptedError(status=400, message=message, type="invalid_request_error", param=param)


def model_list(model: str, created: int) -> JSONObject:
    """``GET /v1/models``: the one model this server answers as, in OpenAI's list shape."""
    return {"object": "list", "data": [model_entry(model, created)]}


def model_entry(model: str, created: int) -> JSONObject:
    """One model object, as ``GET /v1/models/<id>`` returns it."""
    return {"id": model, "object": "model", "created": created, "owned_by": "trioagent"}
