"""Provider credentials (trioagent/credential.py): secrets, env fallbacks, defaults."""

from __future__ import annotations

import copy
import logging

import pytest

from trioagent import credential as cred
from trioagent.exception import ModelCredentialError, error_info
from trioagent.types import ErrorType

SECRET = "sk-very-secret-123456"

ALL: list[type[cred.CredentialBase]] = [
    cred.OpenAICredential,
    cred.AnthropicCredential,
    cred.GeminiCredential,
    cred.DashScopeCredential,
    cred.OllamaCredential,
    cred.DeepSeekCredential,
    cred.MoonshotCredential,
    cred.XAICredential,
    cred.MiniMaxCredential,
    cred.VolcengineCredential,
    cred.TypeSafeCredential,
]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for cls in ALL:
        for var in (*cls.api_key_env, *cls.base_url_env):
            monkeypatch.delenv(var, raising=False)
    monkeypatch.delenv("OPENAI_ORG_ID", raising=False)


@pytest.mark.parametrize("cls", ALL)
def test_key_is_redacted_in_repr_and_str(cls: type[cred.CredentialBase]) -> None:
    credential = cls(api_key=SECRET, name="prod")

    assert SECRET not in repr(credential)
    assert SECRET not in str(credential)
    assert "api_key='***'" in repr(credential)
    assert "name='prod'" in repr(credential)
    assert credential.get_api_key() == SECRET


def test_missing_key_repr_shows_none() -> None:
    assert "api_key=None" in repr(cred.OpenAICredential())


def test_redacted_in_containers_and_copies() -> None:
    credential = cred.AnthropicCredential(api_key=SECRET)

    assert SECRET not in repr([credential, {"c": credential}])
    assert SECRET not in repr(copy.deepcopy(credential))


def test_key_never_logged(caplog: pytest.LogCaptureFixture) -> None:
    credential = cred.OpenAICredential(api_key=SECRET)
    with caplog.at_level(logging.DEBUG):
        logging.getLogger("test").info("using %s / %r", credential, credential)

    assert SECRET not in caplog.text


@pytest.mark.parametrize(
    ("cls", "var"),
    [
        (cred.OpenAICredential, "OPENAI_API_KEY"),
        (cred.AnthropicCredential, "ANTHROPIC_API_KEY"),
        (cred.GeminiCredential, "GEMINI_API_KEY"),
        (cred.DashScopeCredential, "DASHSCOPE_API_KEY"),
        (cred.DeepSeekCredential, "DEEPSEEK_API_KEY"),
        (cred.MoonshotCredential, "MOONSHOT_API_KEY"),
        (cred.XAICredential, "XAI_API_KEY"),
        (cred.MiniMaxCredential, "MINIMAX_API_KEY"),
        (cred.VolcengineCredential, "ARK_API_KEY"),
    ],
)
def test_missing_key_names_the_env_var(
    cls: type[cred.CredentialBase], var: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ModelCredentialError, match=var) as info:
        cls().get_api_key()
    assert error_info(info.value).type == ErrorType.SETUP
    assert not info.value.retryable

    monkeypatch.setenv(var, SECRET)
    assert cls().get_api_key() == SECRET
    assert SECRET not in repr(cls())


def test_explicit_key_wins_over_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "from-env")

    assert cred.OpenAICredential(api_key="explicit").get_api_key() == "explicit"


def test_gemini_accepts_google_api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOOGLE_API_KEY", SECRET)

    assert cred.GeminiCredential().get_api_key() == SECRET


@pytest.mark.parametrize(
    ("cls", "url"),
    [
        (cred.OpenAICredential, "https://api.openai.com/v1"),
        (cred.AnthropicCredential, "https://api.anthropic.com"),
        (cred.GeminiCredential, "https://generativelanguage.googleapis.com"),
        (cred.DashScopeCredential, "https://dashscope.aliyuncs.com/compatible-mode/v1"),
        (cred.DeepSeekCredential, "https://api.deepseek.com"),
        (cred.MoonshotCredential, "https://api.moonshot.cn/v1"),
        (cred.XAICredential, "https://api.x.ai/v1"),
        (cred.OllamaCredential, "http://localhost:11434"),
        (cred.MiniMaxCredential, "https://api.minimax.io/anthropic"),
        (cred.VolcengineCredential, "https://ark.cn-beijing.volces.com/api/v3"),
    ],
)
def test_default_base_urls(cls: type[cred.CredentialBase], url: str) -> None:
    assert cls().get_base_url() == url


def test_base_url_field_then_env_then_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://env.example/v1/")

    assert cred.OpenAICredential().get_base_url() == "http://env.example/v1"
    assert cred.OpenAICredential(base_url="http://mine/v1/").get_base_url() == "http://mine/v1"


def test_anthropic_base_url_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://proxy")

    assert cred.AnthropicCredential().get_base_url() == "http://proxy"


def test_typesafe_has_no_default_base_url() -> None:
    with pytest.raises(ModelCredentialError, match="no base URL"):
        cred.TypeSafeCredential(api_key="k").get_base_url()


def test_openai_organization(monkeypatch: pytest.MonkeyPatch) -> None:
    assert cred.OpenAICredential().get_organization() is None
    monkeypatch.setenv("OPENAI_ORG_ID", "org-env")
    assert cred.OpenAICredential().get_organization() == "org-env"
    assert cred.OpenAICredential(organization="org-1").get_organization() == "org-1"


def test_xai_api_host_and_base_url(monkeypatch: pytest.MonkeyPatch) -> None:
    assert cred.XAICredential(api_host="eu.x.ai").get_base_url() == "https://eu.x.ai/v1"
    assert cred.XAICredential(base_url="http://local/v1").get_base_url() == "http://local/v1"
    monkeypatch.setenv("XAI_BASE_URL", "http://env/v1")
    assert cred.XAICredential().get_base_url() == "http://env/v1"


def test_ollama_host_needs_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    assert cred.OllamaCredential().get_api_key() is None
    assert cred.OllamaCredential(host="gpu-box:11434").get_base_url() == "http://gpu-box:11434"
    monkeypatch.setenv("OLLAMA_HOST", "https://ollama.example/")
    assert cred.OllamaCredential().get_base_url() == "https://ollama.example"


def test_redact_replaces_explicit_and_env_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEEPSEEK_API_KEY", "env-secret-999")
    credential = cred.DeepSeekCredential(api_key=SECRET)

    text = credential.redact(f"bad key {SECRET}; also env-secret-999")

    assert text == "bad key ***; also ***"


def test_ids_and_type_tags() -> None:
    a, b = cred.OpenAICredential(), cred.OpenAICredential()

    assert a.id != b.id
    assert {cls.type for cls in ALL} == {
        "openai_credential",
        "anthropic_credential",
        "gemini_credential",
        "dashscope_credential",
        "ollama_credential",
        "deepseek_credential",
        "moonshot_credential",
        "xai_credential",
        "minimax_credential",
        "volcengine_credential",
        "typesafe_credential",
    }


def test_keyword_only() -> None:
    with pytest.raises(TypeError):
        cred.OpenAICredential(SECRET)  # type: ignore[call-arg]
