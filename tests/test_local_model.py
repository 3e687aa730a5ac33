"""``LocalChatModel`` (trioagent/model/_local.py) over the loopback server: the request a local
OpenAI-compatible server gets (string content, ``max_tokens``, no key unless one is set), the
``local:`` spec, and a reply with a tool round swept by ``cancel_sweep``.

The same model against a real llama.cpp server is the integration tier
(``tests/integration/test_llama_cpp.py``, ``just integration``).
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
from provider_kit import MSGS, lookup_agent, open_connections, start_server

from trioagent.credential import LocalCredential
from trioagent.formatter import OpenAIChatFormatter
from trioagent.message import AssistantMsg, HintBlock, TextBlock, UserMsg
from trioagent.model import LocalChatModel, LocalChatParameters, chat_model_from_spec
from trioagent.testing import (
    OpenAICompatibleServer,
    ScriptedReply,
    ScriptedToolCall,
    SweepRun,
    cancel_sweep,
    serve_openai_compatible,
)
from trioagent.types import FinishedReason

NO_DEADLINE: dict[str, Any] = {"read_timeout": None, "connect_timeout": None}


def _local(server: OpenAICompatibleServer, **kwargs: Any) -> LocalChatModel:
    return LocalChatModel("smollm2", credential=LocalCredential(base_url=server.base_url), **kwargs)


@pytest.fixture
async def server(nursery: trio.Nursery) -> OpenAICompatibleServer:
    return await start_server(nursery)


async def test_request_has_string_content_max_tokens_and_no_key(
    server: OpenAICompatibleServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-must-not-leak")
    monkeypatch.delenv("TRIOAGENT_LOCAL_API_KEY", raising=False)
    server.push(ScriptedReply(text="Sunny.", usage={"prompt_tokens": 9, "completion_tokens": 2}))
    msgs = [
        *MSGS,
        AssistantMsg("assistant", [TextBlock(text="Which day?"), HintBlock(hint="Be terse.")]),
    ]
    parameters = LocalChatParameters(max_tokens=16, temperature=0.0, seed=7)

    async with _local(server, parameters=parameters) as model:
        final = await model(msgs)

    assert [b.text for b in final.content] == ["Sunny."]  # type: ignore[union-attr]
    assert final.usage is not None
    assert (final.usage.input_tokens, final.usage.output_tokens) == (9, 2)
    (request,) = server.requests
    body = request.body
    assert isinstance(body, dict)
    assert [(m["role"], m["content"]) for m in body["messages"]] == [
        ("system", "Be brief."),
        ("user", "Weather in Paris?"),
        ("assistant", "Which day?"),
        ("user", "Be terse."),
    ]
    assert (body["model"], body["max_tokens"], body["temperature"], body["seed"]) == (
        "smollm2",
        16,
        0.0,
        7,
    )
    assert "max_completion_tokens" not in body
    assert body["stream_options"] == {"include_usage": True}
    assert "authorization" not in request.headers
    assert request.headers["accept"] == "text/event-stream"


async def test_a_local_key_is_sent_and_redacted(
    server: OpenAICompatibleServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRIOAGENT_LOCAL_API_KEY", "local-key-0123")
    server.push("ok")

    async with _local(server) as model:
        await model(MSGS)
        assert "local-key-0123" not in repr(model)

    assert server.requests[0].headers["authorization"] == "Bearer local-key-0123"


async def test_tools_are_flattened_and_a_length_finish_is_reported(
    server: OpenAICompatibleServer,
) -> None:
    server.push(ScriptedReply(text="It is", finish_reason="length"))
    tool = {
        "type": "function",
        "function": {
            "name": "lookup",
            "parameters": {
                "type": "object",
                "properties": {"where": {"$ref": "#/$defs/City"}},
                "$defs": {"City": {"type": "string"}},
            },
        },
    }

    async with _local(server, parameters=LocalChatParameters(parallel_tool_calls=False)) as model:
        final = await model(MSGS, tools=[tool])

    assert final.metadata["finish_reason"] == "length"
    body = server.requests[0].body
    assert isinstance(body, dict)
    (sent,) = body["tools"]
    assert sent["function"]["parameters"]["properties"]["where"] == {"type": "string"}
    assert body["parallel_tool_calls"] is False


def test_spec_builds_a_local_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TRIOAGENT_LOCAL_BASE_URL", raising=False)
    default = chat_model_from_spec("local:smollm2")

    assert isinstance(default, LocalChatModel)
    assert default.model == "smollm2"
    assert default.credential.get_base_url() == "http://127.0.0.1:8080/v1"
    monkeypatch.setenv("TRIOAGENT_LOCAL_BASE_URL", "http://127.0.0.1:11434/v1/")
    from_env = chat_model_from_spec("local:llama3.2:1b")
    assert isinstance(default.formatter, OpenAIChatFormatter)
    assert default.formatter.text_as_string is True
    assert default.context_size == 8192
    assert from_env.model == "llama3.2:1b"
    assert from_env.credential.get_base_url() == "http://127.0.0.1:11434/v1"


def test_bad_parameters_are_rejected() -> None:
    with pytest.raises(ValueError, match="max_tokens"):
        LocalChatParameters(max_tokens=0)


async def test_agent_reply_with_a_tool_round(server: OpenAICompatibleServer) -> None:
    server.push(
        ScriptedReply(tool_calls=[ScriptedToolCall("lookup", '{"city": "Paris"}', id="c1")]),
        "Sunny in Paris.",
    )
    seen: list[str] = []

    async with _local(server) as model:
        reply = await lookup_agent(model, seen).reply(UserMsg("user", "Weather in Paris?"))

    assert seen == ["Paris"]
    assert reply.finished_reason == FinishedReason.COMPLETED
    second = server.requests[1].body
    assert isinstance(second, dict)
    roles = [(m["role"], type(m["content"]).__name__) for m in second["messages"]]
    assert roles == [("system", "str"), ("user", "str"), ("assistant", "str"), ("tool", "str")]


@pytest.mark.parametrize("mode", ["interrupt", "outer"])
async def test_sweep_tool_round_over_a_local_model(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, mode: str
) -> None:
    script = [
        ScriptedReply(tool_calls=[ScriptedToolCall("lookup", '{"city": "Oslo"}')]),
        ScriptedReply(text="Sunny in Oslo.", chunk_size=4),
    ]
    servers: list[OpenAICompatibleServer] = []
    models: list[LocalChatModel] = []

    async def make_agent() -> Any:
        server = await nursery.start(serve_openai_compatible, list(script))
        servers.append(server)
        models.append(_local(server, max_retries=0, **NO_DEADLINE))
        return lookup_agent(models[-1])

    def no_busy_connection(run: SweepRun) -> None:
        pool = open_connections(run.agent.model.http_client)
        assert all(c.is_idle() or c.is_closed() for c in pool), run.cancel_at

    report = await cancel_sweep(
        make_agent, lambda: UserMsg("user", "Weather?"), mode=mode, check=no_busy_connection
    )

    baseline = report.runs[0]
    assert baseline.msg is not None
    assert baseline.msg.get_text_content() == "Sunny in Oslo."
    assert report.outcomes["interrupted"] >= 3
    for model in models:
        await model.aclose()
    for server in servers:
        with trio.fail_after(5):
            await server.wait_all_closed()
