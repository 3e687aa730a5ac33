"""05 — Background tools supervised by ``async with agent:``, cancelled when the scope ends.

Two slow tools:

* ``index_repository`` is declared ``is_background=True``: the call moves to the agent's
  supervision nursery at once and the model gets a "running in background" result, so the
  reply can finish while the work goes on;
* ``run_tests`` has ``background_after=0.1``: it runs in the foreground, and only moves to
  the background because it is still running after 0.1 s.

Both tasks belong to the nursery opened by ``async with agent:`` — never to a global task
manager, never fire-and-forget.  ``agent.background_tasks`` shows their handles (status,
``cancel()``, ``await wait()``).  When ``run_tests`` finishes, its real result is delivered to
the model on the next reasoning step.  ``index_repository`` is still running when the
``async with agent:`` block ends: leaving the scope cancels it, its ``finally`` runs, and it
records an *interrupted* result, which the model is told about on the next reply.
"""

from __future__ import annotations

import json

import trio
from _common import check, open_model, round_trips, unpaired_tool_calls

from trioagent import Toolkit, UserMsg
from trioagent.agent import Agent, BackgroundStatus
from trioagent.permission import PermissionDecision
from trioagent.testing import ScriptedReply, ScriptedToolCall

ALLOW = PermissionDecision(behavior="allow", message="safe in this example")
log: list[str] = []


async def index_repository(path: str) -> str:
    """Build a search index of a repository (takes minutes).

    Args:
        path: the repository path.
    """
    try:
        await trio.sleep(600)
        return "indexed"
    finally:
        log.append("index_repository cleaned up")  # runs when the supervisor cancels it


async def run_tests(suite: str) -> str:
    """Run a test suite.

    Args:
        suite: the suite name.
    """
    await trio.sleep(0.3)
    return f"{suite}: 42 passed"


def requested_text(body: dict[str, object]) -> str:
    """The messages of a request the embedded server received, as JSON text."""
    return json.dumps(body.get("messages"))


async def main() -> None:
    toolkit = Toolkit()
    toolkit.register_function(index_repository, is_background=True, permission=ALLOW)
    toolkit.register_function(run_tests, background_after=0.1, permission=ALLOW)
    calls = [
        ScriptedToolCall("index_repository", '{"path": "."}', id="call_index"),
        ScriptedToolCall("run_tests", '{"suite": "unit"}', id="call_tests"),
    ]
    async with trio.open_nursery() as nursery:
        model, server = await open_model(
            nursery,
            [
                ScriptedReply(tool_calls=calls),
                ScriptedReply(text="Both jobs are running in the background."),
                ScriptedReply(text="The unit tests passed (42); indexing is still running."),
                ScriptedReply(text="Indexing was cancelled; shall I start it again?"),
            ],
        )
        async with model:
            agent = Agent("assistant", "You start long jobs in the background.", model, toolkit)
            async with agent:  # the supervision scope: background tools live in here
                first = await agent.reply(UserMsg("user", "Index the repo and run the unit tests."))
                print("agent:", first.get_text_content())
                check(first.finished_reason == "completed", "the reply finished while tools run")
                tasks = dict(agent.background_tasks)
                for call_id, handle in tasks.items():
                    print(f"  {call_id}: {handle.status}")
                check(len(tasks) == 2, "both calls run under the agent's supervisor")
                check(unpaired_tool_calls(agent) == [], "each call has its 'running' result")

                tests = await tasks["call_tests"].wait()  # a handle can be awaited
                check(tests.state == "success", "run_tests finished in the background")
                second = await agent.reply(UserMsg("user", "How did the tests go?"))
                print("agent:", second.get_text_content())
                if server is not None:
                    check(
                        "42 passed" in requested_text(server.requests[-1].body),
                        "the real test result reached the model on the next reasoning step",
                    )
                check(tasks["call_index"].status == BackgroundStatus.RUNNING, "indexing still runs")
            # Leaving `async with agent:` cancelled the indexing task and waited for it.
            index = tasks["call_index"]
            check(index.status == BackgroundStatus.INTERRUPTED, "leaving the scope interrupted it")
            check(index.result is not None, "an interrupted result was recorded")
            check(log == ["index_repository cleaned up"], "the tool's cleanup ran (no orphan task)")

            third = await agent.reply(UserMsg("user", "And the index?"))
            print("agent:", third.get_text_content())
            if server is not None:
                sent = requested_text(server.requests[-1].body)
                check(
                    "index_repository" in sent and "interrupted" in sent,
                    "the model was told that indexing was interrupted",
                )
            check(unpaired_tool_calls(agent) == [], "every tool call has exactly one result")
            check(round_trips(agent), "the state round-trips through JSON")
        nursery.cancel_scope.cancel()


if __name__ == "__main__":
    trio.run(main)
