"""Shared helpers of the example suite: the model every example talks to, and the checks.

By default an embedded OpenAI-compatible server runs on loopback (real sockets, real SSE),
scripted per example.  Set ``TRIOAGENT_MODEL=<provider>:<model>`` (e.g. ``openai:gpt-4o-mini`` with
``OPENAI_API_KEY``, ``anthropic:claude-sonnet-4-5`` with ``ANTHROPIC_API_KEY``) to talk to a real provider instead; scripted
replies are then ignored, and the checks that depend on the script are skipped.
"""

from __future__ import annotations

import collections
import os
import sys
from collections.abc import Sequence
from typing import Any

import trio

from trioagent.agent import Agent, AgentState
from trioagent.credential import OpenAICredential
from trioagent.message import ToolCallBlock, ToolResultBlock
from trioagent.model import (
    ChatModelBase,
    OpenAIChatModel,
    chat_model_from_spec,
    credential_from_spec,
)
from trioagent.serialization import dumps, loads
from trioagent.testing import (
    OpenAICompatibleServer,
    RecordedRequest,
    ScriptEntry,
    serve_openai_compatible,
)


def real_provider() -> str | None:
    """The configured real model (``TRIOAGENT_MODEL``), or ``None`` for the embedded server."""
    return os.environ.get("TRIOAGENT_MODEL") or None


if real_provider():
    # Checked on import, before any example enters trio.run, so a typo is one clear line.
    try:
        credential_from_spec(real_provider() or "")
    except ValueError as _exc:
        sys.exit(f"TRIOAGENT_MODEL: {_exc}")


async def open_model(
    nursery: trio.Nursery, script: Sequence[ScriptEntry], **model_kwargs: Any
) -> tuple[ChatModelBase, OpenAICompatibleServer | None]:
    """A model for an example: the embedded server playing ``script``, or a real provider.

    ``model_kwargs`` go to :class:`OpenAIChatModel` (``max_retries``, ``retry_delay``, ...).
    """
    configured = real_provider()
    if configured:
        return chat_model_from_spec(configured, **model_kwargs), None
    server = await nursery.start(serve_openai_compatible, list(script))
    model = OpenAIChatModel(
        "trioagent-test",
        credential=OpenAICredential(api_key="sk-local-example", base_url=server.base_url),
        **model_kwargs,
    )
    return model, server


def require_extra(module: str, extra: str) -> None:
    """Exit with code 3 (the runner reports the example as not run, with the command that
    installs what it needs) when ``module`` of the optional ``extra`` is missing."""
    try:
        __import__(module)
    except ImportError as exc:
        print(f"NEEDS: pip install 'trioagent[{extra}]' (no {exc.name})")
        sys.stdout.flush()
        os._exit(3)


def check(condition: bool, what: str) -> None:
    """Exit non-zero when the library broke its promise."""
    if not condition:
        print(f"FAILED: {what}", file=sys.stderr)
        sys.stdout.flush()
        sys.stderr.flush()
        # Not sys.exit(): inside a nursery SystemExit arrives wrapped in an exception group
        # with a long traceback; the FAILED line is the whole story.
        os._exit(1)
    print(f"ok: {what}")


def unpaired_tool_calls(agent: Agent) -> list[str]:
    """Tool-call ids of the agent's context without exactly one result (rule 6: empty)."""
    calls: collections.Counter[str] = collections.Counter()
    results: collections.Counter[str] = collections.Counter()
    for msg in agent.state.context:
        for block in msg.content:
            if isinstance(block, ToolCallBlock):
                calls[block.id] += 1
            elif isinstance(block, ToolResultBlock):
                results[block.id] += 1
    return sorted(i for i in calls.keys() | results.keys() if calls[i] != 1 or results[i] != 1)


def round_trips(agent: Agent) -> bool:
    """Whether the agent's state survives JSON unchanged (rule 6)."""
    payload = dumps(agent.state)
    return dumps(loads(payload, AgentState)) == payload


def orphaned_ids(body: Any) -> list[str]:
    """Tool-call ids an OpenAI chat request leaves without a ``tool`` message (must be empty:
    a provider rejects such a request with HTTP 400)."""
    answered = {m.get("tool_call_id") for m in body.get("messages", []) if m.get("role") == "tool"}
    asked = [
        call["id"]
        for m in body.get("messages", [])
        if m.get("role") == "assistant"
        for call in m.get("tool_calls") or []
    ]
    return [i for i in asked if i not in answered]


def human_text(request: RecordedRequest) -> str:
    """The text of the last user message that is not an agent-injected reminder.

    (``RecordedRequest.last_user_text`` also sees the runtime-state hint the agent injects as
    a ``user`` message, ``<system-reminder>...``.)
    """
    for message in reversed(request.body.get("messages", [])):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        parts = [content] if isinstance(content, str) else [p.get("text", "") for p in content]
        text = " ".join(str(p) for p in parts if p)
        if not text.lstrip().startswith(("<system-reminder>", "<system-notification>")):
            return text
    return ""


async def wait_closed(server: OpenAICompatibleServer | None, grace: float = 5.0) -> bool:
    """Wait (bounded) until every connection the embedded server accepted is closed."""
    if server is None:
        return True
    with trio.move_on_after(grace):
        await server.wait_all_closed()
    return server.open_connections == 0
