"""``agent.stream()`` (``ReplyStream``): events reach a pulling consumer in batches, in order,
complete; the stream as a ``trio.abc.ReceiveChannel``; a consumer that reacts to an event
while the reply waits for it."""

from __future__ import annotations

import trio
import trio.lowlevel
import trio.testing
from agent_kit import make_agent, user

from trioagent.agent import Agent
from trioagent.event import AgentEvent, EventType
from trioagent.testing import ScriptedModel, cancel_sweep, text_chunks


class StepCounter(trio.abc.Instrument):
    """Counts the scheduling steps of one task."""

    def __init__(self, task: trio.lowlevel.Task) -> None:
        self.task = task
        self.steps = 0

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        if task is self.task:
            self.steps += 1


async def test_a_pulling_consumer_wakes_once_per_batch_not_once_per_chunk() -> None:
    chunks = [f"t{i} " for i in range(300)]
    agent = make_agent([text_chunks(*chunks)])  # ScriptedModel: a schedule point per chunk
    counter = StepCounter(trio.lowlevel.current_task())
    events: list[AgentEvent] = []
    trio.lowlevel.add_instrument(counter)
    try:
        async with agent.stream(user()) as reply:
            async for event in reply:
                events.append(event)
    finally:
        trio.lowlevel.remove_instrument(counter)
    deltas = [e.delta for e in events if e.type == EventType.TEXT_BLOCK_DELTA]  # type: ignore[attr-defined]
    assert "".join(deltas) == "".join(chunks)
    assert events[-1].type == EventType.REPLY_END
    assert reply.result.get_text_content() == "".join(chunks)
    # One wake-up per chunk would be 300 steps of the consumer's task.
    assert counter.steps < 40


async def test_a_consumer_sees_each_event_before_the_reply_waits_on_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # A model that waits between chunks (as a socket does): each chunk's event reaches the
    # consumer while the model waits, so the consumer can act on it in time.
    model = ScriptedModel([text_chunks("a", "b", "c", "d")], chunk_delay=1.0)
    agent = make_agent([])
    agent.model = model
    arrivals: list[tuple[float, str]] = []
    async with agent.stream(user()) as reply:
        async for event in reply:
            if event.type == EventType.TEXT_BLOCK_DELTA:
                arrivals.append((trio.current_time(), event.delta))  # type: ignore[attr-defined]
    assert [delta for _, delta in arrivals] == ["a", "b", "c", "d"]
    times = [at for at, _ in arrivals]
    assert times == sorted(set(times))  # one arrival per chunk delay, none held back


async def test_the_stream_as_a_receive_channel() -> None:
    agent = make_agent([text_chunks("one ", "two")])
    async with agent.stream(user()) as reply:
        channel = reply.channel
        assert isinstance(channel, trio.abc.ReceiveChannel)
        first = await channel.receive()
        rest = [event async for event in channel]
    assert first.type == EventType.REPLY_START
    assert rest[-1].type == EventType.REPLY_END
    assert reply.result.get_text_content() == "one two"


async def test_sweep_a_pulled_reply_whose_events_are_held(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # No chunk delay: the model never waits, so the reply task stays runnable and its events
    # are held in batches when each interrupt lands (interrupt mode pulls agent.stream()).
    chunks = [f"w{i} " for i in range(100)]

    def build() -> Agent:
        return make_agent([text_chunks(*chunks)])

    report = await cancel_sweep(build, user, mode="interrupt")
    assert report.points > 100
    interrupted = [
        r for r in report.runs if r.end is not None and r.end.finished_reason == "interrupted"
    ]
    assert len(interrupted) > 50
    for run in interrupted:
        deltas = "".join(
            e.delta  # type: ignore[attr-defined]
            for e in run.events
            if e.type == EventType.TEXT_BLOCK_DELTA
        )
        assert "".join(chunks).startswith(deltas)  # nothing lost or reordered on the way
        assert run.msg is not None
        assert run.msg.finished_reason == "interrupted"
        answers = [m for m in run.agent.state.context if m.role == "assistant"]
        saved = answers[-1].get_text_content() if answers else ""
        assert saved == deltas  # the partial the consumer saw is the partial saved


async def test_leaving_the_block_while_events_are_held_interrupts_the_reply() -> None:
    agent = make_agent([text_chunks(*[f"w{i} " for i in range(300)])])
    seen = 0
    async with agent.stream(user()) as reply:
        async for event in reply:
            seen += 1
            if event.type == EventType.TEXT_BLOCK_DELTA:
                break  # the rest of the first batch is still queued, more are held
    assert reply.msg is not None
    assert reply.msg.finished_reason == "interrupted"
    assert not agent.is_replying
    assert seen < 300
