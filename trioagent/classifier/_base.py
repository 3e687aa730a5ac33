"""``ClassifierModelBase``: a model that answers typed questions with probabilities."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import ClassVar, TypeAlias

import httpx2

from .._core.json_types import JSONObject, JSONValue
from .._http import HTTPClientOwner
from ..credential import CredentialBase
from ..exception import ModelError
from ..message import DataBlock, TextBlock
from ..types import ErrorType
from ._types import ClassifierResponse, Question

__all__ = ["ClassifierInput", "ClassifierModelBase", "ClassifierResponseError"]

#: What a classifier classifies: a text, a JSON object, or text and image blocks.
ClassifierInput: TypeAlias = str | Mapping[str, JSONValue] | Sequence[TextBlock | DataBlock]


class ClassifierResponseError(ModelError):
    """The classifier answered, but not with a usable answer (not JSON, an unknown answer
    type, a question left unanswered, a choice that was not offered, ...)."""

    error_type = ErrorType.UPSTREAM


class ClassifierModelBase(HTTPClientOwner):
    """Base class of classifier models.

    Args:
        model: the provider's model name.
        credential: API key and base URL.
        parameters: extra request keys sent with every call.
        http_client: an ``httpx2.AsyncClient`` to use (never closed by the model); without one
            the model creates its own on first use and :meth:`aclose` (or ``async with``)
            closes it.
        timeout: total deadline of one call in seconds (``None``: none).
        read_timeout / connect_timeout: httpx2 timeouts of a client the model creates.

    Call it with the state and the questions, keyed by name::

        response = await classifier(
            "I need a proof of Fermat's little theorem",
            {"route": ChoiceQuestion(criteria={"fast": "small talk", "strong": "math"})},
        )
        response.content["route"]  # ChoiceAnswer(choice="strong", confidence=0.93, ...)
    """

    type: ClassVar[str] = "classifier"

    def __init__(
        self,
        model: str,
        *,
        credential: CredentialBase | None = None,
        parameters: Mapping[str, JSONValue] | None = None,
        http_client: httpx2.AsyncClient | None = None,
        timeout: float | None = 30.0,
        read_timeout: float | None = 30.0,
        connect_timeout: float | None = 10.0,
    ) -> None:
        if timeout is not None and timeout <= 0:
            raise ValueError("timeout must be > 0 or None")
        self.model = model
        self.credential = credential
        self.parameters: JSONObject = dict(parameters or {})
        self.timeout = timeout
        self.read_timeout = read_timeout
        self.connect_timeout = connect_timeout
        self._set_http_client(http_client)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r})"

    def _redact(self, text: str) -> str:
        return self.credential.redact(text) if self.credential is not None else text

    async def __call__(
        self, state: ClassifierInput, questions: Mapping[str, Question], **kwargs: JSONValue
    ) -> ClassifierResponse:
        """Answer every question about ``state``; ``content`` is keyed by question name.

        Raises:
            ValueError: no questions, or a state the provider cannot take.
            ClassifierResponseError: the provider's answer is unusable.
            ModelError: the provider call failed (HTTP status, connection, timeout).
        """
        raise NotImplementedError(f"{type(self).__name__} does not implement __call__")
