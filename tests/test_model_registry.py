"""``chat_model_from_spec``: a ``"provider:model"`` string to a chat model."""

from __future__ import annotations

import pytest

from trioagent.credential import AnthropicCredential, OllamaCredential, OpenAICredential
from trioagent.model import (
    PROVIDERS,
    AnthropicChatModel,
    GeminiChatModel,
    OllamaChatModel,
    OpenAIChatModel,
    OpenAIResponseModel,
    chat_model_from_spec,
    credential_from_spec,
)


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
