"""``chat_model_from_spec``: a ``"provider:model"`` string to a chat model."""

from __future__ import annotations

import pytest
import trio

from trioagent.agent import Agent, ModelConfig
from trioagent.credential import AnthropicCredential, OllamaCredential, OpenAICredential
from trioagent.message import UserMsg
from trioagent.middleware import ChatModelCandidate, ModelRouterMiddleware, RAGMiddleware
from trioagent.model import (
    PROVIDERS,
    AnthropicChatModel,
    GeminiChatModel,
    OllamaChatModel,
    OpenAIChatModel,
    OpenAIResponseModel,
    as_chat_model,
    chat_model_from_spec,
    credential_from_spec,
)
from trioagent.testing import serve_openai_compatible


@pytest.mark.parametrize(
    ("spec", "cls"),
    [
        ("openai:gpt-4o-mini", OpenAIChatModel),
        ("openai-response:gpt-5", OpenAIResponseModel),
        ("anthropic:claude-sonnet-4-5", AnthropicChatModel),
        ("gemini:gemini-2.5-flash", GeminiChatModel),
        ("ollama:qwen3:8b", OllamaChatModel),
    ],
)
def test_spec_builds_the_provider_model(spec: str, cls: type) -> None:
    model = chat_model_from_spec(spec, max_retries=0)

    assert isinstance(model, cls)
    assert model.model == spec.partition(":")[2]  # the rest, colons included ("qwen3:8b")
    assert model.max_retries == 0


def test_every_provider_is_constructible() -> None:
    for provider, (model_class, credential_class) in PROVIDERS.items():
        model = chat_model_from_spec(f"{provider}:m")
        assert type(model) is model_class
        assert isinstance(credential_from_spec(f"{provider}:m"), credential_class)


def test_credential_takes_the_base_url() -> None:
    credential = credential_from_spec("openai:m", base_url="http://127.0.0.1:9/v1")

    assert isinstance(credential, OpenAICredential)
    assert credential.get_base_url() == "http://127.0.0.1:9/v1"
    assert isinstance(credential_from_spec("anthropic:m"), AnthropicCredential)
    assert isinstance(credential_from_spec("ollama:m"), OllamaCredential)


@pytest.mark.parametrize("spec", ["gpt-4o", "nosuch:model", "openai:", ""])
def test_bad_spec_is_a_clear_error(spec: str) -> None:
    with pytest.raises(ValueError, match=r"'<provider>:<model>' with provider one of .*openai"):
        chat_model_from_spec(spec)


def test_as_chat_model_takes_a_model_or_a_spec_and_names_the_fix() -> None:
    model = OpenAIChatModel("gpt-4o")
    assert as_chat_model(model) is model
    built = as_chat_model("openai:gpt-4o")
    assert isinstance(built, OpenAIChatModel)
    assert built.model == "gpt-4o"
    with pytest.raises(TypeError, match=r"fallback must be a chat model .*'openai:gpt-4o'"):
        as_chat_model(3, "fallback")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^fallback: a model must be given as"):
        as_chat_model("gpt-4o", "fallback")


async def test_the_agent_closes_a_model_it_built_from_a_spec_when_its_block_ends(
    nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A model built from a spec string is the agent's: leaving ``async with agent:`` closes
    its client, so the kept-alive connection to the server ends; a model passed in stays
    open for its owner."""
    server = await nursery.start(serve_openai_compatible, ["Hello!", "Again!"])
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    async with Agent("a", "", "openai:gpt-4o") as agent:
        await agent.reply(UserMsg("hi"))
        assert server.open_connections == 1  # kept alive in the model's pool
    with trio.fail_after(10):
        await server.wait_all_closed()
    async with server.chat_model() as model:
        async with Agent("b", "", model) as other:
            await other.reply(UserMsg("hi"))
        assert server.open_connections == 1  # the caller's model: still open


async def test_a_spec_string_is_taken_wherever_a_model_is(
    nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The three-line first program: ``Agent(name, prompt, "openai:<model>")`` builds the
    model from the environment (here: the loopback server) and answers ``UserMsg("hi")``."""
    server = await nursery.start(serve_openai_compatible, ["Hello!", "Hi again."])
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    agent = Agent("a", "", "openai:gpt-4o", model_config=ModelConfig(fallback_model="openai:m2"))
    assert isinstance(agent.model, OpenAIChatModel)
    assert isinstance(agent.model_config.fallback_model, OpenAIChatModel)
    assert agent.model_config.fallback_model.model == "m2"
    try:
        msg = await agent.reply(UserMsg("hi"))
    finally:
        await agent.model.aclose()
    assert msg.get_text_content() == "Hello!"
    assert server.requests[0].body["model"] == "gpt-4o"
    candidate = ChatModelCandidate("fast", "openai:gpt-4o-mini", "quick answers")
    assert isinstance(candidate.model, OpenAIChatModel)
    router = ModelRouterMiddleware("openai:gpt-4o-mini", [candidate])
    assert isinstance(router.classifier_model, OpenAIChatModel)
    assert isinstance(RAGMiddleware([], rerank_model="openai:r").rerank_model, OpenAIChatModel)
