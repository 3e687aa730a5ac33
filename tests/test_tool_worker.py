"""Sync function tools off the event loop: worker threads (abandoned on cancel, never
silently) and worker processes (killed on cancel)."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Awaitable
from typing import Any

import pytest
import trio
from agent_kit import ALLOW, call, calls, make_agent, reply_cancelled, text
from tool_workers import die, power, refuse, write_pid_and_sleep

from trioagent import UserMsg
from trioagent.agent import Agent
from trioagent.event import AgentEvent, ReplyEndEvent
from trioagent.message import ToolCallBlock, ToolResultBlock, ToolResultState
from trioagent.testing import cancel_sweep
from trioagent.tool import FunctionTool, Toolkit


def _call(name: str, call_id: str = "call-1", arguments: str = "{}") -> ToolCallBlock:
    return ToolCallBlock(id=call_id, name=name, input=arguments)


async def _wait_until(condition: Any, timeout: float = 10) -> None:
    """Poll in real time (threads and processes run on the real clock)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await trio.to_thread.run_sync(time.sleep, 0.01)


def _results(agent: Agent) -> list[ToolResultBlock]:
    return [b for m in agent.state.context for b in m.content if isinstance(b, ToolResultBlock)]


# -- threads ---------------------------------------------------------------------------------


async def test_a_cancelled_sync_tool_returns_at_once_and_its_thread_is_counted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    kit = Toolkit()
    started, release = threading.Event(), threading.Event()

    def stuck() -> str:
        """Blocks until released."""
        started.set()
        release.wait(10)
        return "late"

    kit.register_function(stuck, permission=ALLOW)
    caplog.set_level(logging.WARNING, logger="trioagent.tool")
    with trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(kit.call_tool, _call("stuck", "call-42"))
            await trio.to_thread.run_sync(started.wait, 10)
            scope.cancel()
    assert scope.cancelled_caught
    assert not release.is_set()  # the call returned while its thread still runs
    assert kit.abandoned_threads == 1
    warning = caplog.records[-1]
    assert warning.levelno == logging.WARNING
    assert "'stuck'" in warning.getMessage()
    assert "call-42" in warning.getMessage()
    release.set()
    await _wait_until(lambda: kit.abandoned_threads == 0)
    assert "has finished; its result was discarded (0 still running)" in caplog.text


@pytest.mark.parametrize("mode", ["interrupt", "outer"])
async def test_a_sync_tool_cannot_hold_a_reply_past_its_cancellation(mode: str) -> None:
    """The issue's case: a sync tool blocking for seconds, the reply cancelled meanwhile.  The
    reply ends at once (interrupted result, one end event) while the thread still runs."""
    toolkit = Toolkit()
    started, release, finished = threading.Event(), threading.Event(), threading.Event()

    def sleepy(seconds: float) -> str:
        """Sleeps (blocking).

        Args:
            seconds: how long.
        """
        started.set()
        release.wait(seconds)
        finished.set()
        return "rested"

    toolkit.register_function(sleepy, permission=ALLOW)
    agent = make_agent([calls(call("c1", "sleepy", seconds=3)), text("never")], toolkit)
    events: list[AgentEvent] = []

    async def record(event: AgentEvent) -> None:
        events.append(event)

    def thread_started() -> Awaitable[bool]:
        return trio.to_thread.run_sync(started.wait, 10)

    msg, propagated, _ = await reply_cancelled(
        agent, UserMsg("user", "rest"), mode, thread_started, record
    )
    still_running = not finished.is_set()
    release.set()
    assert still_running
    assert [r.state for r in _results(agent)] == [ToolResultState.INTERRUPTED]
    assert [type(e) for e in events].count(ReplyEndEvent) == 1
    assert isinstance(events[-1], ReplyEndEvent)
    assert events[-1].finished_reason == "interrupted"
    assert (msg is not None) is (mode == "interrupt")
    assert propagated is (mode == "outer")
    await _wait_until(lambda: toolkit.abandoned_threads == 0)


async def test_an_abandoned_thread_cannot_emit_into_a_finished_call() -> None:
    kit = Toolkit()
    started, release, emitted = threading.Event(), threading.Event(), threading.Event()
    chunks: list[Any] = []

    def chatty(emit: Any) -> str:
        """Streams after it was abandoned."""
        started.set()
        release.wait(10)
        emit("too late")
        emitted.set()
        return "done"

    kit.register_function(chatty, permission=ALLOW)

    async def record(chunk: Any) -> None:
        chunks.append(chunk)

    with trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(lambda: kit.call_tool(_call("chatty"), emit=record))
            await trio.to_thread.run_sync(started.wait, 10)
            scope.cancel()
    release.set()
    await _wait_until(emitted.is_set)
    await _wait_until(lambda: kit.abandoned_threads == 0)
    assert chunks == []


@pytest.mark.parametrize("mode", ["interrupt", "outer"])
async def test_sweep_a_reply_running_a_sync_tool_in_a_thread(
    autojump_clock: trio.testing.MockClock, mode: str
) -> None:
    toolkits: list[Toolkit] = []
    threads: set[int] = set()

    def convert(amount: float) -> str:
        """Convert euros to dollars (a blocking computation).

        Args:
            amount: euros.
        """
        threads.add(threading.get_ident())
        time.sleep(0.002)
        return f"{amount * 1.1:.2f} USD"

    def make() -> Agent:
        toolkit = Toolkit()
        toolkit.register_function(convert, permission=ALLOW)
        toolkits.append(toolkit)
        return make_agent(
            [calls(call("c1", "convert", amount=10)), text("11.00 USD.")],
            toolkit,
        )

    report = await cancel_sweep(make, UserMsg("user", "10 EUR?"), mode=mode)
    assert report.runs[0].msg is not None
    assert report.runs[0].msg.get_text_content() == "11.00 USD."
    assert report.outcomes["interrupted"] >= 1
    assert threads
    assert threading.get_ident() not in threads
    await _wait_until(lambda: all(t.abandoned_threads == 0 for t in toolkits))


# -- processes -------------------------------------------------------------------------------


async def test_a_process_isolated_tool_runs_in_another_process() -> None:
    kit = Toolkit()
    kit.register_function(power, isolate="process", permission=ALLOW)
    response = await kit.call_tool(_call("power", arguments='{"base": 2, "exponent": 10}'))
    assert response.state == ToolResultState.SUCCESS
    answer = response.text()
    assert '"value": 1024' in answer
    assert f'"pid": {os.getpid()}' not in answer


async def test_a_process_isolated_tool_is_killed_on_cancel(tmp_path: Any) -> None:
    toolkit = Toolkit()
    toolkit.register_function(write_pid_and_sleep, isolate="process", permission=ALLOW)
    pid_file = tmp_path / "pid"
    agent = make_agent(
        [calls(call("c1", "write_pid_and_sleep", path=str(pid_file), seconds=60)), text("x")],
        toolkit,
    )
    result: list[Any] = []

    async def reply() -> None:
        result.append(await agent.reply(UserMsg("user", "sleep")))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(reply)
        await _wait_until(lambda: pid_file.exists() and pid_file.read_text())
        pid = int(pid_file.read_text())
        os.kill(pid, 0)  # the worker is alive
        agent.interrupt()
    assert result[0].finished_reason == "interrupted"
    assert [r.state for r in _results(agent)] == [ToolResultState.INTERRUPTED]
    with pytest.raises(ProcessLookupError):  # killed and reaped before reply() returned
        os.kill(pid, 0)


async def test_a_process_isolated_tool_error_and_death_become_error_results() -> None:
    kit = Toolkit()
    kit.register_function(refuse, isolate="process", permission=ALLOW)
    kit.register_function(die, isolate="process", permission=ALLOW)
    failed = await kit.call_tool(_call("refuse", arguments='{"reason": "no way"}'))
    assert failed.state == ToolResultState.ERROR
    assert failed.text() == "ValueError: no way"
    died = await kit.call_tool(_call("die"))
    assert died.state == ToolResultState.ERROR
    assert "worker process of tool 'die' exited with status 3" in died.text()


def test_process_isolation_refuses_what_a_process_cannot_run() -> None:
    def local(n: int) -> int:
        return n

    async def coroutine(n: int) -> int:
        return n

    def streams(n: int, emit: Any) -> int:
        return n

    with pytest.raises(TypeError, match="local: isolate='process' needs a function"):
        FunctionTool(local, isolate="process")
    with pytest.raises(TypeError, match="coroutine: isolate='process' is for plain sync"):
        FunctionTool(coroutine, isolate="process")
    with pytest.raises(TypeError, match="streams: a tool run with isolate='process' cannot"):
        FunctionTool(streams, isolate="process")

    def scripted(n: int) -> int:
        return n

    scripted.__module__ = "__main__"  # as if defined in the script being run
    with pytest.raises(TypeError, match=r"scripted: .*defined in the script being run"):
        FunctionTool(scripted, isolate="process")
    with pytest.raises(ValueError, match="isolate must be"):
        FunctionTool(power, isolate="fork")  # type: ignore[arg-type]
