"""Shared helpers of the example suite: the model every example talks to.

By default an embedded OpenAI-compatible server runs on loopback (real sockets, real SSE),
scripted per example.  Set ``TRIOAGENT_MODEL=openai:<model>`` (and ``OPENAI_API_KEY``, plus
``OPENAI_BASE_URL`` for a compatible endpoint) to talk to a real provider instead; scripted
replies are then ignored.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

import trio

from trioagent.credential import OpenAICredential
from trioagent.model import ChatModelBase, OpenAIChatModel
from trioagent.testing import OpenAICompatibleServer, ScriptEntry, serve_openai_compatible


async def open_model(
    nursery: trio.Nursery, script: Sequence[ScriptEntry]
) -> tuple[ChatModelBase, OpenAICompatibleServer | None]:
    """A model for an example: the embedded server playing ``script``, or a real provider."""
    configured = os.environ.get("TRIOAGENT_MODEL")
    if configured:
        provider, _, name = configured.partition(":")
        if provider != "openai" or not name:
            sys.exit(f"TRIOAGENT_MODEL must look like 'openai:<model>', got {configured!r}")
        return OpenAIChatModel(name), None
    server = await nursery.start(serve_openai_compatible, list(script))
    model = OpenAIChatModel(
        "trioagent-test",
        credential=OpenAICredential(api_key="sk-local-example", base_url=server.base_url),
    )
    return model, server


def check(condition: bool, what: str) -> None:
    """Exit non-zero when the library broke its promise."""
    if not condition:
        print(f"FAILED: {what}", file=sys.stderr)
        sys.exit(1)
    print(f"ok: {what}")
