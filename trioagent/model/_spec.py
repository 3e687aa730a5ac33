"""``as_chat_model``: a chat model as given, or built from a ``"provider:model"`` string.

Apart from the registry so that taking a model (``Agent(model=...)``) does not import every
provider: the registry, which does, is imported only when a string is given.
"""

from __future__ import annotations

import trio

from ._base import ChatModelBase

__all__ = ["as_chat_model", "close_owned_model"]

#: Seconds a model built from a spec is given to close its client in a cancelled scope.
CLOSE_GRACE = 2.0


def as_chat_model(model: ChatModelBase | str, what: str = "model") -> ChatModelBase:
    """A chat model as given, or built from a ``"provider:model"`` spec string.

    Every place that takes a chat model (``Agent(model=...)``, a fallback model, a router's
    candidates, ...) goes through here, so ``"openai:gpt-4o"`` works wherever a model object
    does.  ``what`` names the argument in errors.

    Raises:
        TypeError: neither a model nor a str; the message names both accepted forms.
        ValueError: a spec string with an unknown provider or no model name.
    """
    if isinstance(model, ChatModelBase):
        return model
    if isinstance(model, str):
        from ._registry import chat_model_from_spec  # every provider: only for a string

        try:
            return chat_model_from_spec(model)
        except ValueError as exc:
            raise ValueError(f"{what}: {exc}") from None
    raise TypeError(
        f"{what} must be a chat model (e.g. OpenAIChatModel('gpt-4o')) or a "
        f"'provider:model' string such as 'openai:gpt-4o' (see chat_model_from_spec); "
        f"got {type(model).__name__}"
    )


async def close_owned_model(model: ChatModelBase) -> None:
    """Close a model its owner built from a spec string, even in a cancelled scope.

    Its HTTP client and kept-alive connections end with the owner (``async with agent:``).
    """
    # Shielded so a cancelled owner still closes the sockets; closing idle connections is
    # quick, and the deadline bounds it all the same.
    with trio.CancelScope(shield=True, deadline=trio.current_time() + CLOSE_GRACE):
        await model.aclose()
