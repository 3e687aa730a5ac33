"""The ``TypedDict`` of each hook names exactly the keys the agent passes in ``input_kwargs``."""

from __future__ import annotations

from typing import Any, cast

from agent_kit import ALLOW, call, calls, make_agent, run, text, user

from trioagent.agent import AgentLike
from trioagent.middleware import (
    MiddlewareBase,
    OnActingKwargs,
    OnCheckPermissionKwargs,
    OnCompressContextKwargs,
    OnModelCallKwargs,
    OnReasoningKwargs,
    OnReplyKwargs,
)
from trioagent.model import ChatModelBase
from trioagent.tool import Toolkit


class _Recorder(MiddlewareBase):
    def __init__(self) -> None:
        self.keys: dict[str, set[str]] = {}

    def _saw(self, hook: str, input_kwargs: dict[str, Any]) -> None:
        self.keys.setdefault(hook, set()).update(input_kwargs)

    async def on_reply(
        self, agent: AgentLike, input_kwargs: Any, next_handler: Any, emit: Any
    ) -> None:
        self._saw("on_reply", input_kwargs)
        await next_handler()

    async def on_reasoning(
        self, agent: AgentLike, input_kwargs: Any, next_handler: Any, emit: Any
    ) -> None:
        self._saw("on_reasoning", input_kwargs)
        await next_handler()

    async def on_acting(
        self, agent: AgentLike, input_kwargs: Any, next_handler: Any, emit: Any
    ) -> None:
        self._saw("on_acting", input_kwargs)
        await next_handler()

    async def on_model_call(
        self, agent: AgentLike, input_kwargs: Any, next_handler: Any, emit: Any
    ) -> None:
        self._saw("on_model_call", input_kwargs)
        # The typed view: what a middleware author writes.
        assert isinstance(cast(OnModelCallKwargs, input_kwargs)["current_model"], ChatModelBase)
        await next_handler()

    async def on_check_permission(
        self, agent: AgentLike, input_kwargs: Any, next_handler: Any
    ) -> Any:
        self._saw("on_check_permission", input_kwargs)
        return await next_handler()

    async def on_compress_context(
        self, agent: AgentLike, input_kwargs: Any, next_handler: Any
    ) -> None:
        self._saw("on_compress_context", input_kwargs)
        await next_handler()


async def test_each_hooks_typed_dict_names_the_keys_the_agent_passes() -> None:
    async def echo(value: str) -> str:
        """Echo."""
        return value

    toolkit = Toolkit()
    toolkit.register_function(echo, permission=ALLOW)
    recorder = _Recorder()
    agent = make_agent(
        [calls(call("c1", "echo", value="x")), text("done")], toolkit, middlewares=[recorder]
    )
    await run(agent, user("go"))
    await agent.compress_context()
    expected = {
        "on_reply": OnReplyKwargs,
        "on_reasoning": OnReasoningKwargs,
        "on_acting": OnActingKwargs,
        "on_model_call": OnModelCallKwargs,
        "on_check_permission": OnCheckPermissionKwargs,
        "on_compress_context": OnCompressContextKwargs,
    }
    assert recorder.keys == {hook: set(td.__required_keys__) for hook, td in expected.items()}
