"""``ProviderChatModel``: the construction and request plumbing every provider shares.

A provider is a subclass parametrised by its credential and parameters classes that names its
defaults as class attributes::

    class OllamaChatModel(ProviderChatModel[OllamaCredential, OllamaChatParameters]):
        Parameters = OllamaChatParameters
        default_credential = OllamaCredential
        default_formatter = OllamaChatFormatter
        default_context_size = 32768
        endpoint = "/api/chat"

and implements :meth:`ProviderChatModel._build_body` (and the streaming and non-streaming
hooks of :class:`~trioagent.model.ChatModelBase`).
"""

from __future__ import annotations

from typing import Generic, TypeVar, Unpack

import httpx2

from .._core.json_types import JSONObject
from .._http import bearer_headers, safe_url
from ..credential import CredentialBase
from ..formatter import FormatterBase
from ..message import Msg
from ..types import ToolChoice
from ._base import ChatModelBase, ChatModelOptions

__all__ = ["CredentialT", "ParametersT", "ProviderChatModel", "ProviderOptions"]

CredentialT = TypeVar("CredentialT", bound=CredentialBase)
ParametersT = TypeVar("ParametersT")


class ProviderOptions(ChatModelOptions, Generic[CredentialT, ParametersT], total=False):
    """Every keyword of a provider's constructor: the :class:`ProviderChatModel` ones and the
    :class:`~trioagent.model.ChatModelOptions`.  A provider with keywords of its own takes
    these as ``**options: Unpack[ProviderOptions[ItsCredential, ItsParameters]]``."""

    credential: CredentialT | None
    parameters: ParametersT | None
    extra_body: JSONObject | None
    context_size: int | None
    formatter: FormatterBase | None


class ProviderChatModel(ChatModelBase, Generic[CredentialT, ParametersT]):
    """Base of the provider chat models.

    Args:
        model: the provider's model name.
        credential: key and base URL (default: the provider's credential class, which reads
            the provider's environment variables).
        parameters: generation parameters (default: the provider's parameters class with its
            defaults).
        extra_body: extra top-level request keys, merged after the parameters (how a per-call
            ``extra_body`` combines with it is the provider's to say).
        context_size: the context window (default: the provider's).
        formatter: turns messages into the provider's format (default: the provider's).
        **options: the other :class:`~trioagent.model.ChatModelBase` options
            (:class:`~trioagent.model.ChatModelOptions`).

    Subclasses set :attr:`Parameters`, :attr:`default_credential`,
    :attr:`default_formatter`, :attr:`default_context_size` and :attr:`endpoint`.
    """

    #: The parameters class (``parameters`` defaults to ``Parameters()``).
    Parameters: type[ParametersT]
    #: The credential class used when none is given.
    default_credential: type[CredentialT]
    #: The formatter class used when none is given.
    default_formatter: type[FormatterBase]
    #: The context window when none is given.
    default_context_size: int = 32768
    #: The request path below the credential's base URL.
    endpoint: str = ""

    credential: CredentialT
    parameters: ParametersT
    extra_body: JSONObject | None

    def __init__(
        self,
        model: str,
        *,
        credential: CredentialT | None = None,
        parameters: ParametersT | None = None,
        extra_body: JSONObject | None = None,
        context_size: int | None = None,
        formatter: FormatterBase | None = None,
        **options: Unpack[ChatModelOptions],
    ) -> None:
        super().__init__(
            model,
            credential=credential if credential is not None else self.default_credential(),
            context_size=self.default_context_size if context_size is None else context_size,
            formatter=formatter if formatter is not None else self._new_formatter(),
            **options,
        )
        self.parameters = parameters if parameters is not None else self.Parameters()
        self.extra_body = dict(extra_body) if extra_body else None

    # -- request -------------------------------------------------------------------------------

    async def _build_body(
        self,
        messages: list[Msg],
        tools: list[JSONObject] | None,
        tool_choice: ToolChoice | None,
        *,
        stream: bool,
    ) -> JSONObject:
        """The request body of one call."""
        raise NotImplementedError(f"{type(self).__name__} does not implement _build_body")

    async def _format(self, messages: list[Msg]) -> list[JSONObject]:
        """``messages`` in the provider's format (remote data fetched with the model's client;
        the default formatter when :attr:`formatter` was set to ``None``)."""
        formatter = self.formatter or self._new_formatter()
        return await formatter.format(messages, http_client=self.http_client)

    @classmethod
    def _new_formatter(cls) -> FormatterBase:
        """The formatter used when none is given (default: ``default_formatter()``)."""
        return cls.default_formatter()

    def _body_overrides(self) -> tuple[JSONObject, JSONObject]:
        """(extra body, other per-call keys) for the current call.

        A per-call ``extra_body`` (structured output's disable-thinking step, say) replaces
        the model's ``extra_body`` as a whole.
        """
        call_kwargs = self._call_kwargs()
        extra = call_kwargs.pop("extra_body", self.extra_body)
        return dict(extra or {}), call_kwargs

    def _headers(self, *, stream: bool) -> dict[str, str]:
        """The request headers (default: a Bearer key)."""
        return bearer_headers(self.credential.get_api_key(), stream=stream)

    def _url(self, *, stream: bool) -> str:
        """Where the request goes (default: the base URL and :attr:`endpoint`)."""
        return f"{self.credential.get_base_url()}{self.endpoint}"

    def _endpoint(self) -> str | None:
        """:meth:`_url` without credentials or query string (for error messages)."""
        return safe_url(httpx2.URL(self._url(stream=self.streaming)))

    def _request(self, body: JSONObject, *, stream: bool) -> httpx2.Request:
        return self.http_client.build_request(
            "POST", self._url(stream=stream), json=body, headers=self._headers(stream=stream)
        )

    async def _prepare(
        self,
        messages: list[Msg],
        tools: list[JSONObject] | None,
        tool_choice: ToolChoice | None,
        *,
        stream: bool,
    ) -> httpx2.Request:
        """The HTTP request of one call: its body, sent to :meth:`_url` with
        :meth:`_headers`."""
        body = await self._build_body(messages, tools, tool_choice, stream=stream)
        return self._request(body, stream=stream)
