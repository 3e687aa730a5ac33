"""Runtime-state injection before each reasoning step (trioagent/agent/_injection.py):
the current time, tasks, context length and tool-error hints, and the HINT_BLOCK event that
follows REPLY_START, as in AgentScope."""

from __future__ import annotations

import json
import re

from agent_helpers import Recorder, make_agent, sequential_toolkit, user

from trioagent.agent import ContextConfig, InjectionConfig
from trioagent.agent._state import Task
from trioagent.event import HintBlockEvent
from trioagent.message import HintBlock, Msg, TextBlock, ToolCallBlock, ToolResultBlock
from trioagent.testing import text_chunks, tool_call_chunks

SOURCE = json.dumps({"label": "System", "sublabel": "Runtime State"})


def runtime_hints(agent) -> list[HintBlock]:
    return [
        b
        for m in agent.state.context
        for b in m.content
        if isinstance(b, HintBlock) and b.source == SOURCE
    ]


async def test_hint_is_emitted_on_the_first_reasoning():
    agent, model = make_agent([text_chunks("hello")], inject=True)
    rec = Recorder()
    await agent.reply(user(), on_event=rec)
    assert rec.types[:3] == ["REPLY_START", "HINT_BLOCK", "MODEL_CALL_START"]
    event = rec.events[1]
    assert isinstance(event, HintBlockEvent)
    assert event.source == SOURCE
    assert event.reply_id == agent.state.reply_id
    text = event.hint
    assert isinstance(text, str)
    assert text.startswith("<system-reminder>Treat the following as the ground truth")
    assert re.search(r"<current-time>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d</current-time>", text)
    assert "<timezone>UTC</timezone>" in text
    # Stored first in the reply message, and sent to the model.
    reply_msg = agent.state.context[-1]
    assert isinstance(reply_msg.content[0], HintBlock)
    assert reply_msg.content[0].hint == text
    assert isinstance(reply_msg.content[1], TextBlock)
    sent = model.requests[0].messages[-1]
    assert sent.content[0].hint == text  # type: ignore[union-attr]


async def test_no_second_time_hint_within_the_interval():
    agent, _ = make_agent([text_chunks("a"), text_chunks("b")], inject=True)
    await agent.reply(user())
    rec = Recorder()
    await agent.reply(user(), on_event=rec)
    assert "HINT_BLOCK" not in rec.types
    assert len(runtime_hints(agent)) == 1


async def test_stale_time_is_injected_again():
    agent, _ = make_agent([text_chunks("a")], inject=True)
    old = HintBlock(
        hint="<current-time>2000-01-01T00:00:00</current-time>\n<timezone>UTC</timezone>",
        source=SOURCE,
    )
    agent.state.context.append(Msg("assistant", [old], "assistant"))
    rec = Recorder()
    await agent.reply(user(), on_event=rec)
    assert rec.types.count("HINT_BLOCK") == 1
    assert len(runtime_hints(agent)) == 2


async def test_injection_off_emits_nothing():
    agent, model = make_agent([text_chunks("a")], inject=False)
    rec = Recorder()
    await agent.reply(user(), on_event=rec)
    assert "HINT_BLOCK" not in rec.types
    assert runtime_hints(agent) == []
    assert not any(isinstance(b, HintBlock) for m in model.requests[0].messages for b in m.content)


async def test_hint_without_event_when_emit_hint_event_is_off():
    agent, _ = make_agent(
        [text_chunks("a")],
        inject=True,
        injection_config=InjectionConfig(emit_hint_event=False),
    )
    rec = Recorder()
    await agent.reply(user(), on_event=rec)
    assert "HINT_BLOCK" not in rec.types
    assert len(runtime_hints(agent)) == 1


async def test_extra_fields_custom_template_and_timezone():
    agent, _ = make_agent(
        [text_chunks("a")],
        inject=True,
        injection_config=InjectionConfig(
            template="STATE:\n{runtime_state}",
            timezone="Asia/Tokyo",
            extra_fields={"user-name": "Ada"},
        ),
    )
    rec = Recorder()
    await agent.reply(user(), on_event=rec)
    hint = rec.events[1].hint
    lines = hint.split("\n")
    assert lines[0] == "STATE:"
    assert lines[1].startswith("<current-time>")
    assert lines[2:] == ["<timezone>Asia/Tokyo</timezone>", "<user-name>Ada</user-name>"]


async def test_context_length_field_on_the_first_iteration():
    agent, _ = make_agent(
        [text_chunks("a")],
        inject=True,
        context_config=ContextConfig(
            trigger_ratio=0.8, reserve_ratio=0.1, context_buffer_ratio=0.2
        ),
    )
    agent.model.context_size = 100
    # 60% of the window is past the (0.8 - 0.2) warn band but below the trigger.
    await agent.observe(user("x" * 4 * 61))
    rec = Recorder()
    await agent.reply(user(""), on_event=rec)
    hint = rec.events[1].hint
    assert "<context-length>Your current context contains" in hint
    assert "When reaching 80 tokens, your context will be compressed." in hint


async def test_context_length_field_invites_the_compression_tool_when_no_task_runs():
    invitation = "No task is in progress, so judge by yourself whether the context should be"
    hints = []
    for tasks in ([], [Task(subject="busy", state="in_progress")]):
        agent, _ = make_agent(
            [text_chunks("a")],
            inject=True,
            context_config=ContextConfig(
                trigger_ratio=0.8,
                reserve_ratio=0.1,
                context_buffer_ratio=0.2,
                compression_tool_enabled=True,
            ),
        )
        agent.model.context_size = 1000
        agent.state.tasks_context.tasks = tasks
        await agent.observe(user("x" * 4 * 600))  # past the 600-token warn band, below 800
        rec = Recorder()
        await agent.reply(user(""), on_event=rec)
        hints.append(rec.events[1].hint)
    assert "When reaching 800 tokens, your context will be compressed." in hints[0]
    assert f"{invitation} compressed now by calling `CompressContext`." in hints[0]
    assert "your context will be compressed." in hints[1]
    assert invitation not in hints[1]


async def test_tasks_field_until_the_agent_knows_about_them():
    agent, _ = make_agent([text_chunks("a")], inject=True)
    agent.state.tasks_context.tasks = [
        Task(subject="one", state="in_progress"),
        Task(subject="two"),
        Task(subject="three"),
    ]
    rec = Recorder()
    await agent.reply(user(), on_event=rec)
    assert (
        "<tasks>You have 1 in-progress tasks and 2 pending tasks. Use `TaskList` to view them "
        "if you don't know.</tasks>" in rec.events[1].hint
    )
    # The <tasks> hint now stands in the context: the next reply does not repeat it.
    agent.model.add_steps(text_chunks("b"))
    again = Recorder()
    await agent.reply(user(), on_event=again)
    assert not any("<tasks>" in str(e.hint) for e in again.events if isinstance(e, HintBlockEvent))


async def test_a_call_to_a_task_tool_makes_the_agent_aware_of_its_tasks():
    agent, _ = make_agent([text_chunks("a")], inject=True)
    agent.state.tasks_context.tasks = [Task(subject="one")]
    call = ToolCallBlock(id="t1", name="TaskList", input="{}", state="finished")
    result = ToolResultBlock(id="t1", name="TaskList", output="one", state="success")
    agent.state.context = [user(), Msg("assistant", [call, result], "assistant")]
    rec = Recorder()
    await agent.reply(user(), on_event=rec)
    hints = [str(e.hint) for e in rec.events if isinstance(e, HintBlockEvent)]
    assert hints  # the time is injected ...
    assert not any("<tasks>" in h for h in hints)  # ... but not the tasks


async def test_repeated_failing_calls_add_a_tool_error_field():
    def flaky(x: int) -> str:
        """Always fails.

        Args:
            x: a number.
        """
        raise RuntimeError("nope")

    calls = [
        *tool_call_chunks("c1", "flaky", '{"x": 1}'),
        *tool_call_chunks("c2", "flaky", '{"x":1}'),
        *tool_call_chunks("c3", "flaky", ' {"x": 1} '),
    ]
    agent, _ = make_agent(
        [calls, text_chunks("giving up")], inject=True, toolkit=sequential_toolkit(flaky)
    )
    rec = Recorder()
    await agent.reply(user(), on_event=rec)
    hints = [e.hint for e in rec.events if isinstance(e, HintBlockEvent)]
    assert len(hints) == 2
    assert "<current-time>" not in hints[1]  # the time is recent: only the tool-error field
    assert "<tool-error>The last 3 calls to 'flaky' with the same arguments all failed." in hints[1]
