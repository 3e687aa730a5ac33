"""Context compression, image limits and tool-result truncation.

Before every reasoning step the agent estimates the size of its next request; past
``trigger_ratio × context_size`` the oldest part of the context is summarized by the model
(structured output against ``summary_schema``) and replaced by the summary, keeping the newest
``reserve_ratio × context_size`` tokens verbatim.  A failed summary falls back to truncation.
"""

from __future__ import annotations

import copy
import logging
from typing import Any
from zoneinfo import ZoneInfo

import attrs

from .._core.ids import current_datetime
from ..message import (
    AssistantMsg,
    DataBlock,
    HintBlock,
    Msg,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    URLSource,
    Usage,
    UserMsg,
)
from ..permission import PermissionBehavior, PermissionContext, PermissionDecision
from ..tool import ToolBase, ToolChunk
from ..types import FinishedReason
from ._config import ContextConfig
from ._protocol import AgentLike
from ._reply import ModelInput, StopReply

__all__ = ["CompressContextTool", "Compressor"]

logger = logging.getLogger("trioagent.agent")

TRUNCATED_SUMMARY = (
    "<system-info>Some earlier messages were truncated for limited context.</system-info>"
)
TRUNCATION_NOTE = (
    "\n<<<TRUNCATED>>>\n<system-reminder>The remaining content has been omitted for limited "
    "context.</system-reminder>"
)
_STRUCTURED_TOOL_SCHEMA = [
    {
        "type": "function",
        "function": {
            "name": "generate_structured_output",
            "description": "Call this function to generate structured output required by the user.",
            "parameters": {"type": "object", "properties": {}},
        },
    }
]


class Compressor:
    """Compresses the agent's context, limits its images and truncates long tool results."""

    def __init__(self, agent: AgentLike) -> None:
        self._agent = agent

    async def _count(self, msgs: list[Msg], tools: list[dict[str, Any]] | None) -> int:
        return int(await self._agent.model.count_tokens(msgs, tools))

    async def compress(
        self, cfg: ContextConfig, instructions: str | None, model_input: ModelInput
    ) -> None:
        """Compress the context when the next request would pass the trigger."""
        agent = self._agent
        _limit_images(agent.state.context, cfg)
        tools = model_input.tools
        size = agent.model.context_size
        estimated = await model_input.count_tokens(agent.model)
        if estimated < cfg.trigger_ratio * size:
            return
        state = agent.state
        if not state.context:
            raise RuntimeError(
                "The system prompt and the compression summary exceed the compression threshold "
                f"({estimated} tokens >= {cfg.trigger_ratio} x {size}); nothing can be compressed."
            )
        base = model_input.base_messages()
        compressed, reserved = await self._split(base, tools, cfg.reserve_ratio * size)
        if not compressed:
            logger.warning("nothing fits the compression split; compressing with no reserve")
            compressed, reserved = await self._split(base, tools, 0)
        if not compressed:
            return

        def build_prompt(msgs: list[Msg]) -> list[Msg]:
            prompt = [*base, *msgs]
            if instructions:
                prompt.append(AssistantMsg(agent.name, [HintBlock(hint=instructions)]))
            zone = agent.injection_config.timezone
            now = current_datetime(ZoneInfo(zone))
            stamp = f"{now.strftime(agent.injection_config.time_format)} ({zone})"
            prompt.append(UserMsg("user", cfg.compression_prompt.replace("{current_time}", stamp)))
            return prompt

        prompt = build_prompt(compressed)
        overflow = await self._count(prompt, _STRUCTURED_TOOL_SCHEMA) > size
        result: Any = None
        try:
            result = await agent.model.generate_structured_output(prompt, cfg.summary_schema)
        except Exception as exc:
            error: Exception = exc
            if overflow:
                trimmed = list(compressed)
                while (
                    len(trimmed) > 1
                    and await self._count(build_prompt(trimmed), _STRUCTURED_TOOL_SCHEMA)
                    >= size * cfg.trigger_ratio
                ):
                    trimmed.pop(0)
                try:
                    result = await agent.model.generate_structured_output(
                        build_prompt(trimmed), cfg.summary_schema
                    )
                except Exception as retry_exc:
                    error = retry_exc
            if result is None:
                if not cfg.compression_fallback_to_truncation:
                    raise
                logger.warning("context summary failed (%s); truncating instead", error)
        if result is not None and result.finished_reason == FinishedReason.INTERRUPTED:
            raise StopReply

        # Applying is synchronous, so once started it always completes: a cancellation can only
        # arrive before it (the context is never left half-replaced).
        self._apply(cfg, result, reserved)

    def _apply(self, cfg: ContextConfig, result: Any, reserved: list[Msg]) -> None:
        agent = self._agent
        state = agent.state
        if result is not None:
            fields = dict.fromkeys(
                (
                    "task_overview",
                    "current_state",
                    "important_discoveries",
                    "next_steps",
                    "context_to_preserve",
                ),
                "",
            )
            fields.update({k: str(v) for k, v in result.content.items()})
            new_summary: Any = cfg.summary_template.format(**fields)
        else:
            new_summary = state.summary or TRUNCATED_SUMMARY
        reply_msg = state.reply_message(agent.name)
        usage = None
        if reply_msg is not None and reply_msg.id == state.reply_id and reply_msg.usage is not None:
            usage = attrs.evolve(reply_msg.usage)
        if usage is not None and not any(m.id == state.reply_id for m in reserved):
            reserved.append(Msg(agent.name, [], "assistant", id=state.reply_id, usage=usage))
        state.summary = new_summary
        state.context = reserved
        if result is not None and result.usage is not None:
            if not state.context:
                state.context.append(Msg(agent.name, [], "assistant", id=state.reply_id))
            state.context[-1].append_usage(
                Usage(
                    input_tokens=result.usage.input_tokens,
                    output_tokens=result.usage.output_tokens,
                    cache_input_tokens=result.usage.cache_input_tokens or 0,
                    cache_creation_input_tokens=result.usage.cache_creation_input_tokens or 0,
                )
            )

    async def _split(
        self, base: list[Msg], tools: list[dict[str, Any]], reserve: float
    ) -> tuple[list[Msg], list[Msg]]:
        """Split the context into (compressed, reserved) at the reserve budget."""
        agent = self._agent
        context = agent.state.context
        boundary_index: int | None = None
        for index in range(len(context) - 1, -1, -1):
            if await self._count([*base, *context[index:]], tools) >= reserve:
                boundary_index = index
                break
        if boundary_index is None:
            return [], list(context)
        unfinished = {c.id for c in agent.state.get_unfinished_tool_calls(agent.name)}
        for index, msg in enumerate(context[: boundary_index + 1]):
            if any(isinstance(b, ToolCallBlock) and b.id in unfinished for b in msg.content):
                boundary_index = index
                break
        boundary = context[boundary_index]
        after = context[boundary_index + 1 :]
        blocks = boundary.content
        cut = len(blocks)
        while cut > 0:
            candidate = Msg(boundary.name, blocks[cut - 1 :], boundary.role, id=boundary.id)
            if await self._count([*base, candidate, *after], tools) > reserve:
                break
            cut -= 1
        for index, block in enumerate(blocks):
            if isinstance(block, ToolCallBlock) and block.id in unfinished:
                cut = min(cut, index)
                break
        head, tail = list(blocks[:cut]), list(blocks[cut:])
        compressed_calls = {
            b.id
            for m in context[:boundary_index]
            for b in m.content
            if isinstance(b, ToolCallBlock)
        }
        compressed_calls |= {b.id for b in head if isinstance(b, ToolCallBlock)}
        moved = [b for b in tail if isinstance(b, ToolResultBlock) and b.id in compressed_calls]
        tail = [b for b in tail if b not in moved]
        head.extend(moved)
        reserved_after: list[Msg] = []
        for msg in after:
            stray = [
                b
                for b in msg.content
                if isinstance(b, ToolResultBlock) and b.id in compressed_calls
            ]
            if stray:
                head.extend(stray)
                msg = attrs.evolve(msg, content=[b for b in msg.content if b not in stray])
            reserved_after.append(msg)
        compressed = list(context[:boundary_index])
        if head:
            compressed.append(_with_content(boundary, head))
        reserved = ([_with_content(boundary, tail)] if tail else []) + reserved_after
        return compressed, reserved

    async def truncate(self, result: ToolResultBlock) -> ToolResultBlock:
        """Cut a tool result above ``tool_result_limit`` tokens and say so."""
        agent = self._agent
        limit = agent.context_config.tool_result_limit
        output = (
            [TextBlock(text=result.output)]
            if isinstance(result.output, str)
            else list(result.output)
        )

        async def tokens(blocks: list[Any]) -> int:
            return await self._count([AssistantMsg(agent.name, list(blocks))], None)

        if await tokens(output) <= limit:
            return result
        boundary = 0
        for index in range(1, len(output)):
            if await tokens(output[:index]) < limit:
                boundary = index
        kept = [copy.deepcopy(b) for b in output[:boundary]]
        block = output[boundary] if boundary < len(output) else None
        offloaded = list(output[boundary + 1 :])
        if isinstance(block, TextBlock):
            before = await tokens(kept)
            whole = await tokens([*kept, block])
            share = (limit - before) / max(whole - before, 1)
            keep_chars = max(0, min(len(block.text), int(share * len(block.text))))
            if keep_chars:
                if kept and isinstance(kept[-1], TextBlock):
                    kept[-1].text += block.text[:keep_chars]
                else:
                    kept.append(TextBlock(id=block.id, text=block.text[:keep_chars]))
            if keep_chars < len(block.text):
                offloaded.insert(0, TextBlock(text=block.text[keep_chars:]))
        elif block is not None:
            offloaded.insert(0, block)
        if not offloaded:
            return result
        if kept and isinstance(kept[-1], TextBlock):
            kept[-1].text += TRUNCATION_NOTE
        else:
            kept.append(TextBlock(text=TRUNCATION_NOTE))
        return attrs.evolve(result, output=kept)


def _with_content(msg: Msg, blocks: list[Any]) -> Msg:
    clone = copy.deepcopy(msg)
    clone.content = copy.deepcopy(blocks)
    return clone


def _limit_images(context: list[Msg], cfg: ContextConfig) -> None:
    """Replace the oldest image blocks beyond ``max_image_num`` with a short reminder."""
    found: list[tuple[list[Any], int, DataBlock, bool]] = []
    for msg in context:
        for index, block in enumerate(msg.content):
            if type(block) is TextBlock:  # most blocks: nothing to look into
                continue
            if isinstance(block, DataBlock) and block.source.media_type.startswith("image/"):
                found.append((msg.content, index, block, msg.role != "user"))
            nested = (
                block.output
                if isinstance(block, ToolResultBlock)
                else block.hint
                if isinstance(block, HintBlock)
                else None
            )
            if isinstance(nested, list):
                for inner, item in enumerate(nested):
                    if isinstance(item, DataBlock) and item.source.media_type.startswith("image/"):
                        found.append((nested, inner, item, False))
    excess = len(found) - cfg.max_image_num
    for container, index, block, top_level in found[: max(excess, 0)]:
        named = f"named '{block.name}' " if block.name else ""
        if isinstance(block.source, URLSource):
            text = (
                f"<system-reminder>The image {named}is offloaded into {block.source.url}, you can "
                "refer to it when needed.</system-reminder>"
            )
        else:
            text = f"<system-reminder>The image {named}is removed to free up context space.</system-reminder>"
        container[index] = HintBlock(hint=text) if top_level else TextBlock(text=text)


class CompressContextTool(ToolBase):
    """``CompressContext``: lets the model compress its own context (``compression_tool_enabled``)."""

    name = "CompressContext"
    description = (
        "Compress the conversation context now, replacing older messages with a summary. Use it "
        "when the context is getting long and no task is in the middle of a step."
    )
    input_schema = {"type": "object", "properties": {}}  # noqa: RUF012
    is_concurrency_safe = False

    def __init__(self, agent: AgentLike) -> None:
        super().__init__()
        self._agent = agent

    async def check_permissions(
        self, tool_input: dict[str, Any], context: PermissionContext
    ) -> PermissionDecision:
        return PermissionDecision(
            behavior=PermissionBehavior.ALLOW, message="Compressing the context is always allowed."
        )

    async def call(self, emit: Any, /, **kwargs: Any) -> ToolChunk:
        agent = self._agent
        before = len(agent.state.context), agent.state.summary
        cfg = attrs.evolve(
            agent.context_config,
            trigger_ratio=max(
                agent.context_config.trigger_ratio - agent.context_config.context_buffer_ratio,
                agent.context_config.reserve_ratio + 1e-9,
            ),
        )
        try:
            await agent.compress_context(cfg)
        except Exception as exc:
            return ToolChunk(
                content=[TextBlock(text=f"Context compression failed: {exc}")], state="error"
            )
        if (len(agent.state.context), agent.state.summary) == before:
            text = "The context is not long enough to compress, so it remains unchanged."
        else:
            text = "Context compressed successfully."
        return ToolChunk(content=[TextBlock(text=text)])
