"""Runtime-state injection before each reasoning step.

A hint with the current time (and, when relevant, task counts, the context size and a warning
about repeated failing tool calls) is appended to the reply message, so the model reasons with
ground truth that may have changed since the conversation started.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from .._core.emit import Emit
from .._core.ids import current_datetime
from ..event import AgentEvent, HintBlockEvent
from ..message import HintBlock, TextBlock, ToolCallBlock, ToolResultBlock, ToolResultState
from ._protocol import AgentLike
from ._reply import ModelInput

__all__ = ["Injector"]

_TIME_RE = re.compile(r"<current-time>(.*?)</current-time>")
_TZ_RE = re.compile(r"<timezone>(.*?)</timezone>")


def _hint_text(hint: HintBlock) -> str:
    if isinstance(hint.hint, str):
        return hint.hint
    return "\n".join(b.text for b in hint.hint if isinstance(b, TextBlock))


class Injector:
    """Appends the runtime-state hint (the time, task counts, the context size, repeated
    failures) to the reply before a reasoning step."""

    def __init__(self, agent: AgentLike) -> None:
        self._agent = agent

    async def inject(self, model_input: ModelInput, emit: Emit[AgentEvent]) -> None:
        """Append (and announce) the runtime-state hint when any field is due."""
        agent = self._agent
        cfg = agent.injection_config
        if not cfg.inject_runtime_state:
            return
        source = json.dumps(cfg.injection_source, ensure_ascii=False)
        fields: dict[str, str] = {}

        now = current_datetime(ZoneInfo(cfg.timezone))
        last_time = _last_injected_time(agent, source)
        if last_time is None or not (
            timedelta(0) <= now - last_time <= timedelta(hours=cfg.time_interval)
        ):
            fields["current-time"] = now.strftime(cfg.time_format)
            fields["timezone"] = cfg.timezone

        tasks = agent.state.tasks_context.tasks
        in_progress = sum(1 for t in tasks if t.state == "in_progress")
        pending = sum(1 for t in tasks if t.state == "pending")
        if (in_progress or pending) and not _aware_of_tasks(agent, source):
            fields["tasks"] = (
                f"You have {in_progress} in-progress tasks and {pending} pending tasks. "
                "Use `TaskList` to view them if you don't know."
            )

        ctx = agent.context_config
        if agent.state.cur_iter == 0:
            tokens = await model_input.count_tokens(agent.model)
            size = agent.model.context_size
            if tokens > (ctx.trigger_ratio - ctx.context_buffer_ratio) * size:
                text = (
                    f"Your current context contains {tokens} tokens. When reaching "
                    f"{int(ctx.trigger_ratio * size)} tokens, your context will be compressed."
                )
                if ctx.compression_tool_enabled and not in_progress:
                    text += (
                        " No task is in progress, so judge by yourself whether the context should be "
                        "compressed now by calling `CompressContext`."
                    )
                fields["context-length"] = text

        repeated = _repeated_failures(agent)
        if repeated is not None:
            name, count = repeated
            fields["tool-error"] = cfg.tool_retries_hint.format(count=count, tool_name=name)

        if not fields:
            return
        fields.update(cfg.extra_fields)
        state_text = "\n".join(f"<{k}>{v}</{k}>" for k, v in fields.items())
        hint = HintBlock(hint=cfg.template.replace("{runtime_state}", state_text), source=source)
        agent.state.append_context(agent.name, [hint])
        if cfg.emit_hint_event:
            await emit(
                HintBlockEvent(
                    reply_id=agent.state.reply_id,
                    block_id=hint.id,
                    source=hint.source,
                    hint=hint.hint,
                )
            )


def _last_injected_time(agent: AgentLike, source: str) -> datetime | None:
    for msg in reversed(agent.state.context):
        if msg.role != "assistant":
            continue
        for block in reversed(msg.content):
            if not isinstance(block, HintBlock) or block.source != source:
                continue
            text = _hint_text(block)
            found = _TIME_RE.search(text)
            if found is None:
                continue
            tz = _TZ_RE.search(text)
            try:
                zone = ZoneInfo(tz.group(1)) if tz else ZoneInfo(agent.injection_config.timezone)
                return datetime.strptime(
                    found.group(1), agent.injection_config.time_format
                ).replace(tzinfo=zone)
            except (ValueError, KeyError):
                return None
    return None


def _aware_of_tasks(agent: AgentLike, source: str) -> bool:
    names = set(agent.injection_config.task_tool_names)
    for msg in agent.state.context:
        if msg.role != "assistant":
            continue
        for block in msg.content:
            if (
                isinstance(block, HintBlock)
                and block.source == source
                and "<tasks>" in _hint_text(block)
            ):
                return True
            if isinstance(block, ToolCallBlock) and block.name in names:
                return True
    return False


def _normalized_input(raw: str) -> str:
    try:
        return json.dumps(json.loads(raw), sort_keys=True)
    except ValueError:
        return raw.strip()


def _repeated_failures(agent: AgentLike) -> tuple[str, int] | None:
    """The tool whose trailing results are all errors with the same arguments, if often enough."""
    last = agent.state.reply_message(agent.name)
    if last is None:
        return None
    calls = {b.id: b for b in last.content if isinstance(b, ToolCallBlock)}
    results: list[ToolResultBlock] = []
    for block in reversed(last.content):
        if isinstance(block, ToolResultBlock):
            results.append(block)
        elif not isinstance(block, ToolCallBlock):
            break
    if len(results) < agent.injection_config.tool_retries_limit:
        return None
    if any(r.state != ToolResultState.ERROR for r in results):
        return None
    keys = {
        (r.name, _normalized_input(calls[r.id].input) if r.id in calls else "") for r in results
    }
    if len(keys) != 1:
        return None
    return results[0].name, len(results)
