"""Provider credentials: the API key and where the API lives.

Each credential holds an API key (a secret) and a base URL.  A key or URL left ``None`` falls
back to the provider's usual environment variable (``OPENAI_API_KEY``, ``OPENAI_BASE_URL``,
...), read when the model needs it, and then to the provider's public endpoint.

Secrets never appear in ``repr``/``str``: the key shows as ``'***'``.  A missing key raises
:class:`~trioagent.exception.ModelCredentialError` naming the environment variable to set.

Example::

    credential = OpenAICredential(api_key="sk-...", base_url="http://127.0.0.1:8080/v1")
    model = OpenAIChatModel("gpt-4o", credential=credential)
"""

from __future__ import annotations

import os
from typing import ClassVar

import attrs

from ._core.ids import generate_id
from .exception import ModelCredentialError

__all__ = [
    "AnthropicCredential",
    "CredentialBase",
    "DashScopeCredential",
    "DeepSeekCredential",
    "GeminiCredential",
    "LocalCredential",
    "MiniMaxCredential",
    "MoonshotCredential",
    "OllamaCredential",
    "OpenAICredential",
    "TypeSafeCredential",
    "VolcengineCredential",
    "XAICredential",
]

_REDACTED = "***"


def _redacted(value: str | None) -> str:
    return "None" if value is None else repr(_REDACTED)


@attrs.define(kw_only=True)
class CredentialBase:
    """Base of every credential: an id, a display name, an API key and a base URL.

    Subclasses set the class variables: ``type`` (the discriminator tag), ``api_key_env`` and
    ``base_url_env`` (environment variables read when the field is ``None``, first set one
    wins), ``default_base_url`` and ``requires_api_key``.
    """

    type: ClassVar[str] = "credential"
    api_key_env: ClassVar[tuple[str, ...]] = ()
    base_url_env: ClassVar[tuple[str, ...]] = ()
    default_base_url: ClassVar[str | None] = None
    requires_api_key: ClassVar[bool] = True

    api_key: str | None = attrs.field(default=None, repr=_redacted)
    base_url: str | None = None
    id: str = attrs.field(factory=generate_id)
    name: str = ""

    def __str__(self) -> str:
        return repr(self)

    def get_api_key(self) -> str | None:
        """The API key: the field, else the first set environment variable.

        Raises:
            ModelCredentialError: no key is available and the provider requires one.
        """
        if self.api_key:
            return self.api_key
        for var in self.api_key_env:
            if value := os.environ.get(var):
                return value
        if not self.requires_api_key:
            return None
        where = " or ".join(self.api_key_env) or "a key"
        raise ModelCredentialError(
            f"{type(self).__name__} has no API key: pass api_key=... or set {where}"
        )

    def get_base_url(self) -> str:
        """The base URL without a trailing slash: the field, an environment variable, or the
        provider default."""
        url = self.base_url
        if not url:
            url = next((os.environ[v] for v in self.base_url_env if os.environ.get(v)), None)
        url = url or self.default_base_url
        if not url:
            raise ModelCredentialError(f"{type(self).__name__} has no base URL")
        return url.rstrip("/")

    def secrets(self) -> list[str]:
        """Every secret value this credential may send (for redaction)."""
        values = [self.api_key]
        values.extend(os.environ.get(var) for var in self.api_key_env)
        return [v for v in values if v]

    def redact(self, text: str) -> str:
        """``text`` with every secret of this credential replaced by ``***``."""
        for secret in self.secrets():
            if len(secret) >= 4:
                text = text.replace(secret, _REDACTED)
        return text


@attrs.define(kw_only=True)
class OpenAICredential(CredentialBase):
    """OpenAI (and any OpenAI-compatible server): Bearer key, optional organization."""

    type: ClassVar[str] = "openai_credential"
    api_key_env: ClassVar[tuple[str, ...]] = ("OPENAI_API_KEY",)
    base_url_env: ClassVar[tuple[str, ...]] = ("OPENAI_BASE_URL",)
    default_base_url: ClassVar[str | None] = "https://api.openai.com/v1"

    organization: str | None = None

    def get_organization(self) -> str | None:
        """The organization: the field, else ``OPENAI_ORG_ID``."""
        return self.organization or os.environ.get("OPENAI_ORG_ID") or None


@attrs.define(kw_only=True)
class AnthropicCredential(CredentialBase):
    """Anthropic Messages API."""

    type: ClassVar[str] = "anthropic_credential"
    api_key_env: ClassVar[tuple[str, ...]] = ("ANTHROPIC_API_KEY",)
    base_url_env: ClassVar[tuple[str, ...]] = ("ANTHROPIC_BASE_URL",)
    default_base_url: ClassVar[str | None] = "https://api.anthropic.com"


@attrs.define(kw_only=True)
class GeminiCredential(CredentialBase):
    """Google Gemini (Generative Language API)."""

    type: ClassVar[str] = "gemini_credential"
    api_key_env: ClassVar[tuple[str, ...]] = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
    base_url_env: ClassVar[tuple[str, ...]] = ("GEMINI_BASE_URL",)
    default_base_url: ClassVar[str | None] = "https://generativelanguage.googleapis.com"


@attrs.define(kw_only=True)
class DashScopeCredential(CredentialBase):
    """Alibaba DashScope, OpenAI-compatible mode."""

    type: ClassVar[str] = "dashscope_credential"
    api_key_env: ClassVar[tuple[str, ...]] = ("DASHSCOPE_API_KEY",)
    base_url_env: ClassVar[tuple[str, ...]] = ("DASHSCOPE_BASE_URL",)
    default_base_url: ClassVar[str | None] = "https://dashscope.aliyuncs.com/compatible-mode/v1"


@attrs.define(kw_only=True)
class DeepSeekCredential(CredentialBase):
    """DeepSeek (OpenAI-compatible)."""

    type: ClassVar[str] = "deepseek_credential"
    api_key_env: ClassVar[tuple[str, ...]] = ("DEEPSEEK_API_KEY",)
    base_url_env: ClassVar[tuple[str, ...]] = ("DEEPSEEK_BASE_URL",)
    default_base_url: ClassVar[str | None] = "https://api.deepseek.com"


@attrs.define(kw_only=True)
class MoonshotCredential(CredentialBase):
    """Moonshot / Kimi (OpenAI-compatible)."""

    type: ClassVar[str] = "moonshot_credential"
    api_key_env: ClassVar[tuple[str, ...]] = ("MOONSHOT_API_KEY",)
    base_url_env: ClassVar[tuple[str, ...]] = ("MOONSHOT_BASE_URL",)
    default_base_url: ClassVar[str | None] = "https://api.moonshot.cn/v1"


@attrs.define(kw_only=True)
class XAICredential(CredentialBase):
    """xAI Grok.  ``api_host`` (no scheme) as in AgentScope; ``base_url`` overrides it."""

    type: ClassVar[str] = "xai_credential"
    api_key_env: ClassVar[tuple[str, ...]] = ("XAI_API_KEY",)
    base_url_env: ClassVar[tuple[str, ...]] = ("XAI_BASE_URL",)

    api_host: str = "api.x.ai"

    def get_base_url(self) -> str:
        """``base_url`` (or ``XAI_BASE_URL``), else ``https://{api_host}/v1``."""
        if self.base_url or any(os.environ.get(v) for v in self.base_url_env):
            return super().get_base_url()
        return f"https://{self.api_host}/v1"


@attrs.define(kw_only=True)
class OllamaCredential(CredentialBase):
    """A local (or remote) Ollama server; no key needed.

    ``host`` falls back to ``OLLAMA_HOST``, then ``http://localhost:11434``.  ``base_url`` is
    accepted as an alias of ``host``.
    """

    type: ClassVar[str] = "ollama_credential"
    api_key_env: ClassVar[tuple[str, ...]] = ("OLLAMA_API_KEY",)
    base_url_env: ClassVar[tuple[str, ...]] = ("OLLAMA_HOST",)
    default_base_url: ClassVar[str | None] = "http://localhost:11434"
    requires_api_key: ClassVar[bool] = False

    host: str | None = None

    def get_base_url(self) -> str:
        """``host`` (or ``base_url``), else ``OLLAMA_HOST``, else ``http://localhost:11434``."""
        url = self.host or self.base_url or os.environ.get("OLLAMA_HOST")
        if url and "://" not in url:
            url = f"http://{url}"
        return (url or "http://localhost:11434").rstrip("/")


@attrs.define(kw_only=True)
class LocalCredential(CredentialBase):
    """An OpenAI-compatible server of your own (llama.cpp, Ollama's ``/v1``, vLLM, ...).

    The base URL: the field, else ``TRIOAGENT_LOCAL_BASE_URL``, else llama.cpp's
    ``http://127.0.0.1:8080/v1``.  The key is optional (``TRIOAGENT_LOCAL_API_KEY``, for a
    server started with one); the OpenAI key is never read, so it is never sent to a server
    that is not OpenAI's.
    """

    type: ClassVar[str] = "local_credential"
    api_key_env: ClassVar[tuple[str, ...]] = ("TRIOAGENT_LOCAL_API_KEY",)
    base_url_env: ClassVar[tuple[str, ...]] = ("TRIOAGENT_LOCAL_BASE_URL",)
    default_base_url: ClassVar[str | None] = "http://127.0.0.1:8080/v1"
    requires_api_key: ClassVar[bool] = False


@attrs.define(kw_only=True)
class MiniMaxCredential(CredentialBase):
    """MiniMax (Anthropic-compatible endpoint)."""

    type: ClassVar[str] = "minimax_credential"
    api_key_env: ClassVar[tuple[str, ...]] = ("MINIMAX_API_KEY",)
    base_url_env: ClassVar[tuple[str, ...]] = ("MINIMAX_BASE_URL",)
    default_base_url: ClassVar[str | None] = "https://api.minimax.io/anthropic"


@attrs.define(kw_only=True)
class VolcengineCredential(CredentialBase):
    """Volcengine Ark (OpenAI-compatible)."""

    type: ClassVar[str] = "volcengine_credential"
    api_key_env: ClassVar[tuple[str, ...]] = ("ARK_API_KEY", "VOLCENGINE_API_KEY")
    base_url_env: ClassVar[tuple[str, ...]] = ("ARK_BASE_URL",)
    default_base_url: ClassVar[str | None] = "https://ark.cn-beijing.volces.com/api/v3"


@attrs.define(kw_only=True)
class TypeSafeCredential(CredentialBase):
    """TypeSafe (classifier models only)."""

    type: ClassVar[str] = "typesafe_credential"
    api_key_env: ClassVar[tuple[str, ...]] = ("TYPESAFE_API_KEY",)
    base_url_env: ClassVar[tuple[str, ...]] = ("TYPESAFE_BASE_URL",)
