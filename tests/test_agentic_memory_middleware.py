"""AgenticMemoryMiddleware: the index in the system prompt, the background retrieval of a
reply — owned by the reply's ``on_reply`` nursery and consumed once by ``on_reasoning`` — and
its cancellation; and the edge cases of the memory files (malformed frontmatter, odd
encodings, huge or vanishing files, paths escaping the memory directory)."""

from __future__ import annotations

import datetime
import json
import logging
import os
import posixpath
import time
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from agent_helpers import ALLOW, Recorder, make_agent, user

from trioagent.agent import Agent
from trioagent.event import (
    ConfirmResult,
    ReplyEndEvent,
    RequireUserConfirmEvent,
    UserConfirmResultEvent,
)
from trioagent.memory import (
    DEFAULT_MEMORY_INSTRUCTIONS,
    DEFAULT_RETRIEVAL_INSTRUCTIONS,
    parse_frontmatter,
    truncate_to_tokens,
)
from trioagent.message import (
    HintBlock,
    TextBlock,
    ToolCallBlock,
    ToolCallState,
    ToolResultBlock,
)
from trioagent.middleware import (
    AgenticMemoryMiddleware,
    LocalBackend,
    MemoryBackend,
)
from trioagent.model import ChatResponse
from trioagent.testing import (
    CancelMode,
    ScriptedModel,
    ScriptedRequest,
    SweepRun,
    cancel_sweep,
)
from trioagent.tool import Toolkit
from trioagent.types import ReplyFinishedReason

Params = AgenticMemoryMiddleware.Parameters
EMPTY_INDEX = (
    "Your MEMORY.md is currently empty. When you save new memories, they will appear here."
)
PROFILE = (
    "---\nname: user profile\ndescription: When answering about the user's job\n"
    "type: user\n---\n\nThe user is a marine biologist who studies octopuses.\n"
)


def text(value: str) -> ChatResponse:
    return ChatResponse(content=[TextBlock(text=value)])


def call_recall() -> ChatResponse:
    return ChatResponse(content=[ToolCallBlock(id="call-1", name="recall", input="{}")])


def selection(*names: str) -> ChatResponse:
    """The retrieval model's structured-output answer."""
    return ChatResponse(
        content=[
            ToolCallBlock(
                id="sel",
                name="generate_structured_output",
                input=json.dumps({"selected_files": list(names)}),
            )
        ]
    )


def write(path: Path, content: str, *, age_days: float | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content, encoding="utf-8")
    if age_days is not None:
        stamp = time.time() - age_days * 86_400
        os.utime(path, (stamp, stamp))
    return path


def hints(agent: Agent) -> list[HintBlock]:
    return [b for m in agent.state.context for b in m.content if isinstance(b, HintBlock)]


def date_of(path: Path) -> str:
    return datetime.datetime.fromtimestamp(path.stat().st_mtime).strftime("%Y-%m-%d")


class Setup:
    """An agent whose ``recall`` tool waits for the retrieval, so its second reasoning step
    gets the hint deterministically.  With ``hold_selection`` the retrieval model answers only
    once ``recall`` runs, so the first reasoning step never sees the hint either (the local
    backend reads files in threads, which can otherwise finish before the first step)."""

    def __init__(
        self,
        workdir: Path,
        steps: list[Any],
        *,
        selections: list[Any] | None = None,
        params: dict[str, Any] | None = None,
        backend: MemoryBackend | None = None,
        wait: bool = True,
        chunk_delay: float = 0.0,
        hold_selection: bool = False,
    ) -> None:
        params = dict(params or {})
        self.recall_started = trio.Event()
        self.retrieval_model: ScriptedModel | None = None
        if selections is not None:
            if hold_selection:
                selections = [self._held(step) for step in selections]
            self.retrieval_model = ScriptedModel(selections, model="retrieval")
            params.setdefault("retrieval_model", self.retrieval_model)
        self.mw = AgenticMemoryMiddleware(
            workdir=str(workdir), parameters=Params(**params), backend=backend
        )
        toolkit = Toolkit()

        async def recall() -> str:
            """Wait for the memory retrieval."""
            self.recall_started.set()
            if wait:
                await self.mw.wait_retrieval(self.agent)
            return "recalled"

        toolkit.register_function(recall, is_concurrency_safe=False, permission=ALLOW)
        self.model = ScriptedModel(steps, chunk_delay=chunk_delay)
        self.agent, _ = make_agent(model=self.model, toolkit=toolkit, middlewares=[self.mw])

    def _held(self, step: Any) -> Any:
        async def after_recall(request: ScriptedRequest) -> Any:
            await self.recall_started.wait()
            return step

        return after_recall

    @property
    def structured_calls(self) -> list[ScriptedRequest]:
        assert self.retrieval_model is not None
        return self.retrieval_model.requests

    def system_prompt(self, index: int = 0) -> str:
        first = self.model.requests[index].messages[0]
        assert first.role == "system"
        return first.get_text_content() or ""


# -- helpers ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "limit", "expected"),
    [
        ("abcd" * 10, 10, "abcd" * 10),  # exactly 10 tokens: kept whole
        ("abcd" * 10, 0, ""),
        ("abcd" * 10, -3, ""),
        ("a" * 100, 10, "a" * 40),  # proportional index 40 fits at once
        ("é" * 40, 10, "é" * 20),  # 2 bytes per char: 20 chars = 40 bytes = 10 tokens
        # 15 tokens, limit 5: the proportional index 13 is 6 tokens, one step back fits.
        ("é" * 20 + "a" * 20, 5, "é" * 3),
    ],
)
def test_truncate_to_tokens(content: str, limit: int, expected: str) -> None:
    assert truncate_to_tokens(content, limit) == expected


def test_frontmatter_parsing() -> None:
    assert parse_frontmatter(PROFILE) == {
        "name": "user profile",
        "description": "When answering about the user's job",
        "type": "user",
    }
    # The closing fence may end the text (a frontmatter cut by the read limit right after it).
    assert parse_frontmatter("---\ntype: project\n---") == {"type": "project"}
    assert parse_frontmatter("  \n---\ndescription: x\n---\nbody") == {"description": "x"}
    assert parse_frontmatter("no frontmatter\n---\ntype: user\n---\n") == {}
    assert parse_frontmatter("---\ntype: user\nno closing fence") == {}
    assert parse_frontmatter("---\nnested:\n  - a\ntype: user\n---\n") == {"type": "user"}


def test_parameters_defaults_and_validation() -> None:
    params = Params()
    assert (
        params.memory_max_tokens,
        params.retrieval_async,
        params.retrieval_model,
        params.retrieval_max_tokens_per_md,
        params.retrieval_max_files,
        params.retrieval_max_tokens_per_frontmatter,
    ) == (4000, True, None, 2000, 200, 256)
    assert "{memory_dir}" in params.memory_instructions
    assert params.memory_instructions == DEFAULT_MEMORY_INSTRUCTIONS
    assert "up to 5" in params.retrieval_instructions
    assert params.retrieval_instructions == DEFAULT_RETRIEVAL_INSTRUCTIONS
    with pytest.raises(TypeError):
        Params(memory_max_tokens="many")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Params(retrieval_model=3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="retrieval_model: a model must be given as"):
        Params(retrieval_model="gpt")
    assert Params(retrieval_model="openai:gpt-4o").retrieval_model is not None
    with pytest.raises(TypeError, match="Parameters"):
        AgenticMemoryMiddleware(workdir=".", parameters={"retrieval_async": False})  # type: ignore[arg-type]


async def test_local_backend_does_file_io(tmp_path: Path) -> None:
    backend = LocalBackend()
    target = backend.join_path(str(tmp_path), "a", "b", "note.md")
    await backend.write_file(target, "hé".encode())
    assert await backend.file_exists(target)
    assert not await backend.file_exists(backend.join_path(str(tmp_path), "a"))  # a directory
    assert await backend.read_file(target) == "hé".encode()
    write(tmp_path / "top.md", "x")
    assert await backend.list_dir(str(tmp_path), recursive=True) == [
        os.path.join("a", "b", "note.md"),
        "top.md",
    ]
    assert await backend.list_dir(str(tmp_path)) == ["a", "top.md"]
    assert await backend.stat_mtime(target) == pytest.approx(os.stat(target).st_mtime)
    assert backend.isabs(str(tmp_path))
    assert not backend.isabs("rel/x")
    assert backend.normpath("a/./b/../c") == os.path.normpath("a/c")
    assert isinstance(backend, MemoryBackend)


# -- system prompt --------------------------------------------------------------------------------


async def test_fresh_workdir_gets_the_layout_and_the_empty_index(tmp_path: Path) -> None:
    setup = Setup(tmp_path, [text("done")])
    msg = await setup.agent.reply(user("hello"))
    assert msg.get_text_content() == "done"
    memory_dir = tmp_path / "Memory"
    assert memory_dir.is_dir()
    assert (memory_dir / "MEMORY.md").read_bytes() == b""
    prompt = setup.system_prompt()
    assert prompt.startswith("You are a helpful assistant.\n\n# Long-term memory\n")
    assert str(memory_dir) in prompt
    assert "{memory_dir}" not in prompt
    assert prompt.endswith(f"\n## MEMORY.md\n{EMPTY_INDEX}")
    assert hints(setup.agent) == []


async def test_existing_index_is_shown_and_never_rewritten(tmp_path: Path) -> None:
    index = write(tmp_path / "Memory" / "MEMORY.md", "- [Profile](user_profile.md) — job\n")
    mw = AgenticMemoryMiddleware(workdir=tmp_path, parameters=Params(retrieval_async=False))
    agent, _ = make_agent([], middlewares=[mw])
    prompt = await mw.on_system_prompt(agent, "BASE")
    assert prompt.endswith("\n## MEMORY.md\n- [Profile](user_profile.md) — job\n")
    assert prompt.startswith("BASE\n\n")
    assert index.read_text() == "- [Profile](user_profile.md) — job\n"


async def test_custom_memory_dir_and_plain_substitution(tmp_path: Path) -> None:
    mw = AgenticMemoryMiddleware(
        workdir=str(tmp_path),
        memory_dir="notes",
        parameters=Params(memory_instructions="Dir {memory_dir}; keep {braces} and {0}"),
    )
    agent, _ = make_agent([], middlewares=[mw])
    prompt = await mw.on_system_prompt(agent, "P")
    notes = os.path.join(str(tmp_path), "notes")
    assert prompt == f"P\n\nDir {notes}; keep {{braces}} and {{0}}\n## MEMORY.md\n{EMPTY_INDEX}"
    assert (tmp_path / "notes" / "MEMORY.md").exists()
    assert mw.memory_md_path == os.path.join(notes, "MEMORY.md")


async def test_long_index_is_truncated_with_a_read_notice(tmp_path: Path) -> None:
    write(tmp_path / "Memory" / "MEMORY.md", ("x" * 39 + "\n") * 20)  # 800 chars, 200 tokens
    setup = Setup(tmp_path, [text("ok")], params={"memory_max_tokens": 10})
    await setup.agent.reply(user("hi"))
    prompt = setup.system_prompt()
    index_path = os.path.join(str(tmp_path), "Memory", "MEMORY.md")
    expected = (
        "## MEMORY.md\n" + "x" * 39 + "\n\n<<<TRUNCATED>>>\n<system-reminder>The remaining 19 "
        "lines have been omitted due to context length limits. Use the `Read` tool with offset "
        f"`2` to access the rest of '{index_path}'.</system-reminder>"
    )
    assert prompt.endswith(expected)


# -- retrieval ----------------------------------------------------------------------------------


async def test_selected_file_becomes_one_hint_on_the_next_reasoning_step(tmp_path: Path) -> None:
    write(tmp_path / "Memory" / "MEMORY.md", "- [Profile](user_profile.md)\n")
    profile = write(tmp_path / "Memory" / "user_profile.md", PROFILE)
    setup = Setup(
        tmp_path,
        [call_recall(), text("final answer")],
        selections=[selection("user_profile.md")],
        hold_selection=True,
    )
    msg = await setup.agent.reply(user("What do I work on?"))
    assert msg.get_text_content() == "final answer"

    context = setup.agent.state.context
    assert [m.role for m in context] == ["user", "assistant"]
    blocks = context[1].content
    assert [b.type for b in blocks] == ["tool_call", "tool_result", "hint", "text"]
    assert isinstance(blocks[0], ToolCallBlock)
    assert blocks[0].state == ToolCallState.FINISHED
    assert isinstance(blocks[1], ToolResultBlock)
    hint = blocks[2]
    assert isinstance(hint, HintBlock)
    assert hint.source is None
    assert hint.hint == f"Memory (saved today): {profile}:\n\n{PROFILE}"
    assert len(hints(setup.agent)) == 1
    # The hint reached the second model call, not the first.
    assert not any(
        isinstance(b, HintBlock) for m in setup.model.requests[0].messages for b in m.content
    )
    assert any(
        isinstance(b, HintBlock) for m in setup.model.requests[1].messages for b in m.content
    )

    [request] = setup.structured_calls
    system, prompt = request.messages[0], request.messages[1]
    assert system.get_text_content() == DEFAULT_RETRIEVAL_INSTRUCTIONS
    assert (prompt.get_text_content() or "").startswith(
        "Query: user: What do I work on?\n\nAvailable memories:\n"
        f"- [user] user_profile.md ({date_of(profile)}): When answering about the user's job"
    )


async def test_the_result_is_consumed_once(tmp_path: Path) -> None:
    write(tmp_path / "Memory" / "user_profile.md", PROFILE)
    setup = Setup(
        tmp_path,
        [
            call_recall(),
            ChatResponse(content=[ToolCallBlock(id="call-2", name="recall")]),
            text("end"),
        ],
        selections=[selection("user_profile.md")],
        hold_selection=True,
    )
    await setup.agent.reply(user("job?"))
    assert len(hints(setup.agent)) == 1
    # In the message after the first tool result, before the second call.
    assert [b.type for b in setup.agent.state.context[1].content] == [
        "tool_call",
        "tool_result",
        "hint",
        "tool_call",
        "tool_result",
        "text",
    ]


async def test_the_agents_own_model_selects_when_no_retrieval_model(tmp_path: Path) -> None:
    write(tmp_path / "Memory" / "user_profile.md", PROFILE)
    replies = [call_recall(), text("final answer")]
    selections = [selection("user_profile.md")]

    def dispatch(request: ScriptedRequest) -> ChatResponse:
        names = [t["function"]["name"] for t in request.tools or []]
        return (selections if "generate_structured_output" in names else replies).pop(0)

    setup = Setup(tmp_path, [dispatch, dispatch, dispatch])
    await setup.agent.reply(user("job?"))
    assert replies == []
    assert selections == []
    [hint] = hints(setup.agent)
    assert "marine biologist" in str(hint.hint)


async def test_hallucinated_and_duplicate_names_are_dropped(tmp_path: Path) -> None:
    profile = write(tmp_path / "Memory" / "user_profile.md", PROFILE)
    setup = Setup(
        tmp_path,
        [call_recall(), text("final answer")],
        selections=[selection("missing.md", "user_profile.md", "user_profile.md", "MEMORY.md")],
    )
    await setup.agent.reply(user("job?"))
    [hint] = hints(setup.agent)
    assert hint.hint == f"Memory (saved today): {profile}:\n\n{PROFILE}"
    assert "missing.md" not in str(hint.hint)


async def test_empty_selection_gives_no_hint(tmp_path: Path) -> None:
    write(tmp_path / "Memory" / "user_profile.md", PROFILE)
    setup = Setup(tmp_path, [call_recall(), text("final answer")], selections=[selection()])
    await setup.agent.reply(user("weather?"))
    assert hints(setup.agent) == []
    assert len(setup.structured_calls) == 1


async def test_only_the_index_means_no_structured_call(tmp_path: Path) -> None:
    write(tmp_path / "Memory" / "MEMORY.md", "- nothing yet\n")
    write(tmp_path / "Memory" / "notes.txt", "not markdown")
    setup = Setup(tmp_path, [call_recall(), text("final answer")], selections=[])
    await setup.agent.reply(user("job?"))
    assert hints(setup.agent) == []
    assert setup.structured_calls == []


async def test_retrieval_off_means_no_structured_call(tmp_path: Path) -> None:
    write(tmp_path / "Memory" / "user_profile.md", PROFILE)
    setup = Setup(
        tmp_path,
        [call_recall(), text("final answer")],
        selections=[selection("user_profile.md")],
        params={"retrieval_async": False},
    )
    await setup.agent.reply(user("job?"))
    assert hints(setup.agent) == []
    assert setup.structured_calls == []
    assert str(tmp_path / "Memory") in setup.system_prompt()  # the prompt part still works


async def test_manifest_order_cap_tags_and_frontmatter_limit(tmp_path: Path) -> None:
    memory = tmp_path / "Memory"
    write(memory / "old.md", "---\ndescription: old one\n---\n", age_days=10)
    new = write(memory / "sub" / "new.md", "---\ntype: project\n---\nbody", age_days=1)
    long_head = "---\ndescription: " + "d" * 40 + "\ntype: feedback\n---\n"
    long = write(memory / "long.md", long_head, age_days=5)
    write(memory / "MEMORY.md", "index")
    setup = Setup(
        tmp_path,
        [call_recall(), text("ok")],
        selections=[selection()],
        params={"retrieval_max_files": 2, "retrieval_max_tokens_per_frontmatter": 10},
    )
    await setup.agent.reply(user("q"))
    prompt = setup.structured_calls[0].messages[1].get_text_content() or ""
    manifest = prompt.split("Available memories:\n", 1)[1].split("\n\n<system-reminder>")[0]
    # Newest first, cut to 2; long.md's frontmatter is longer than 40 bytes: no fields.
    sub_new = os.path.join("sub", "new.md")
    assert manifest.splitlines()[:2] == [
        f"- [project] {sub_new} ({date_of(new)})",
        f"- long.md ({date_of(long)})",
    ]
    assert "old.md" not in prompt


async def test_headers_say_how_old_each_file_is(tmp_path: Path) -> None:
    memory = tmp_path / "Memory"
    today = write(memory / "today.md", "T", age_days=0)
    yesterday = write(memory / "yesterday.md", "Y", age_days=1.01)
    older = write(memory / "older.md", "O" * 100, age_days=3.5)
    setup = Setup(
        tmp_path,
        [call_recall(), text("ok")],
        selections=[selection("older.md", "today.md", "yesterday.md")],
        params={"retrieval_max_tokens_per_md": 5},
    )
    await setup.agent.reply(user("q"))
    [hint] = hints(setup.agent)
    assert hint.hint == (
        f"Memory (saved 3 days ago): {older}:\n\n{'O' * 20}"
        f"\n\n---\n\nMemory (saved today): {today}:\n\nT"
        f"\n\n---\n\nMemory (saved yesterday): {yesterday}:\n\nY"
    )


async def test_header_without_mtime_and_unknown_manifest_date(tmp_path: Path) -> None:
    backend = MemBackend({"/w/Memory/a.md": (b"---\ntype: user\n---\nA", None)})
    setup = Setup(
        Path("/w"), [call_recall(), text("ok")], selections=[selection("a.md")], backend=backend
    )
    await setup.agent.reply(user("q"))
    [hint] = hints(setup.agent)
    assert hint.hint == "Memory: /w/Memory/a.md:\n\n---\ntype: user\n---\nA"
    assert "- [user] a.md (unknown)" in (
        setup.structured_calls[0].messages[1].get_text_content() or ""
    )


async def test_absolute_listing_outside_the_memory_dir_is_ignored() -> None:
    backend = MemBackend(
        {"/w/Memory/in.md": (b"IN", 2.0), "/elsewhere/out.md": (b"OUT", 3.0)}, absolute=True
    )
    mw = AgenticMemoryMiddleware(workdir="/w", backend=backend)
    headers = await mw.list_memory_files()
    assert [(h.filename, h.path) for h in headers] == [("in.md", "/w/Memory/in.md")]


async def test_a_single_step_reply_misses_the_hint_and_cancels_the_retrieval(
    autojump_clock: trio.testing.MockClock,
) -> None:
    state = {"asked": 0, "cancelled": 0}

    async def slow_selection(request: ScriptedRequest) -> ChatResponse:
        state["asked"] += 1
        finished = False
        try:
            await trio.sleep_forever()
            finished = True
        finally:
            if not finished:
                state["cancelled"] += 1
        raise AssertionError("unreachable")

    backend = MemBackend({"/w/Memory/user_profile.md": (PROFILE.encode(), time.time())})
    # The agent's model is slow, so the retrieval reaches its model call during the reply.
    setup = Setup(
        Path("/w"),
        [text("quick answer")],
        selections=[slow_selection],
        backend=backend,
        chunk_delay=10.0,
    )
    msg = await setup.agent.reply(user("job?"))
    assert msg.get_text_content() == "quick answer"
    assert hints(setup.agent) == []
    assert state == {"asked": 1, "cancelled": 1}  # started, then cancelled at the reply's end


async def test_a_failing_retrieval_gives_no_hint_and_is_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write(tmp_path / "Memory" / "user_profile.md", PROFILE)
    setup = Setup(
        tmp_path, [call_recall(), text("final answer")], selections=[RuntimeError("selector down")]
    )
    with caplog.at_level(logging.WARNING, logger="trioagent.middleware"):
        msg = await setup.agent.reply(user("job?"))
    assert msg.get_text_content() == "final answer"
    assert hints(setup.agent) == []
    assert "selector down" in caplog.text


async def test_non_message_inputs_start_no_retrieval(tmp_path: Path) -> None:
    write(tmp_path / "Memory" / "user_profile.md", PROFILE)
    setup = Setup(tmp_path, [text("a")], selections=[])
    await setup.agent.reply(None)
    assert setup.structured_calls == []
    with trio.fail_after(5):
        await setup.mw.wait_retrieval(setup.agent)  # outside a reply: returns at once


async def test_concurrent_agents_sharing_one_middleware_get_their_own_hint(
    tmp_path: Path,
) -> None:
    memory = tmp_path / "Memory"
    write(memory / "alice.md", "Alice likes tea.")
    write(memory / "bob.md", "Bob likes coffee.")

    def select(request: ScriptedRequest) -> ChatResponse:
        query = request.messages[-1].get_text_content() or ""
        return selection("alice.md" if "user: I am alice" in query else "bob.md")

    retrieval = ScriptedModel([select, select], model="retrieval")
    mw = AgenticMemoryMiddleware(workdir=tmp_path, parameters=Params(retrieval_model=retrieval))
    agents: list[Agent] = []

    def make(toolkit: Toolkit) -> Agent:
        agent, _ = make_agent([call_recall(), text("done")], toolkit=toolkit, middlewares=[mw])

        async def recall() -> str:
            """Wait for the retrieval."""
            await mw.wait_retrieval(agent)
            return "ok"

        toolkit.register_function(recall, is_concurrency_safe=True, permission=ALLOW)
        return agent

    agents = [make(Toolkit()), make(Toolkit())]

    async with trio.open_nursery() as nursery:
        nursery.start_soon(agents[0].reply, user("I am alice"))
        nursery.start_soon(agents[1].reply, user("I am bob"))
    [alice_hint] = hints(agents[0])
    [bob_hint] = hints(agents[1])
    assert "Alice likes tea." in str(alice_hint.hint)
    assert "Bob" not in str(alice_hint.hint)
    assert "Bob likes coffee." in str(bob_hint.hint)
    assert "Alice" not in str(bob_hint.hint)


# -- cancellation ---------------------------------------------------------------------------------


async def test_interrupt_during_retrieval_ends_the_reply_once(tmp_path: Path) -> None:
    write(tmp_path / "Memory" / "user_profile.md", PROFILE)
    asked = trio.Event()
    cancelled: list[bool] = []

    async def stuck(request: ScriptedRequest) -> ChatResponse:
        asked.set()
        try:
            await trio.sleep_forever()
        finally:
            cancelled.append(True)
        raise AssertionError("unreachable")

    setup = Setup(tmp_path, [call_recall(), text("never")], selections=[stuck])
    rec = Recorder()

    async def interrupt_during_the_selection() -> None:
        await asked.wait()
        setup.agent.interrupt()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(interrupt_during_the_selection)
        msg = await setup.agent.reply(user("job?"), on_event=rec)
    assert msg.finished_reason == ReplyFinishedReason.INTERRUPTED
    assert [str(e.finished_reason) for e in rec.ends] == ["interrupted"]
    assert isinstance(rec.events[-1], ReplyEndEvent)
    assert cancelled == [True]
    assert hints(setup.agent) == []


class MemBackend:
    """An in-memory posix backend that checkpoints on every call (no threads: safe with the
    autojump clock) and records every path it reads.  ``absolute`` lists absolute paths."""

    def __init__(
        self, files: dict[str, tuple[bytes, float | None]], *, absolute: bool = False
    ) -> None:
        self.files = dict(files)
        self.absolute = absolute
        self.reads: list[str] = []

    async def file_exists(self, path: str) -> bool:
        await trio.lowlevel.checkpoint()
        return posixpath.normpath(path) in self.files

    async def read_file(self, path: str) -> bytes:
        await trio.lowlevel.checkpoint()
        self.reads.append(path)
        return self.files[posixpath.normpath(path)][0]

    async def write_file(self, path: str, data: bytes) -> None:
        await trio.lowlevel.checkpoint()
        self.files[posixpath.normpath(path)] = (data, time.time())

    async def list_dir(self, path: str, recursive: bool = False) -> list[str]:
        await trio.lowlevel.checkpoint()
        if self.absolute:
            return sorted(self.files)
        prefix = path.rstrip("/") + "/"
        return sorted(p[len(prefix) :] for p in self.files if p.startswith(prefix))

    async def stat_mtime(self, path: str) -> float | None:
        await trio.lowlevel.checkpoint()
        return self.files[posixpath.normpath(path)][1]

    def join_path(self, *parts: str) -> str:
        return posixpath.join(*parts)

    def normpath(self, path: str) -> str:
        return posixpath.normpath(path)

    def isabs(self, path: str) -> bool:
        return posixpath.isabs(path)


@pytest.mark.parametrize("mode", [CancelMode.INTERRUPT, CancelMode.OUTER])
async def test_cancel_sweep_over_a_reply_with_a_retrieval(
    mode: CancelMode, autojump_clock: trio.testing.MockClock
) -> None:
    counters = {"asked": 0, "cancelled_in_selection": 0}

    async def select(request: ScriptedRequest) -> ChatResponse:
        counters["asked"] += 1
        done = False
        try:
            # Ten schedule points, not one: trio's random task order shifts the points from
            # run to run, and a one-point window could be missed by every run of the sweep.
            for _ in range(10):
                await trio.sleep(0.1)
            done = True
        finally:
            if not done:
                counters["cancelled_in_selection"] += 1
        return selection("user_profile.md")

    def make() -> Agent:
        backend = MemBackend({"/w/Memory/user_profile.md": (PROFILE.encode(), time.time())})
        setup = Setup(
            Path("/w"),
            [call_recall(), text("final answer")],
            selections=[select],
            backend=backend,
        )
        return setup.agent

    def check(run: SweepRun) -> None:
        found = hints(run.agent)
        assert len(found) <= 1
        if run.end is not None and run.end.finished_reason == "completed":
            assert len(found) == 1
            assert "marine biologist" in str(found[0].hint)

    report = await cancel_sweep(make, lambda: user("job?"), mode=mode, check=check)
    assert report.points > 10
    assert report.outcomes["interrupted"] > 0
    assert counters["cancelled_in_selection"] > 0  # cancellations hit the running retrieval


SHORT_PROFILE = (
    "---\nname: user profile\ndescription: When answering about the user's job\n"
    "type: user\n---\n\nThe user is a marine biologist.\n"
)


def call(name: str, call_id: str = "call-1") -> ChatResponse:
    return ChatResponse(content=[ToolCallBlock(id=call_id, name=name, input="{}")])


def selection_of(names: Any) -> ChatResponse:
    return ChatResponse(
        content=[
            ToolCallBlock(
                id="sel",
                name="generate_structured_output",
                input=json.dumps({"selected_files": names}),
            )
        ]
    )


def hint_texts(agent: Any) -> list[str]:
    return [str(b.hint) for m in agent.state.context for b in m.content if isinstance(b, HintBlock)]


class RecordingLocal(LocalBackend):
    """The local backend, recording every path it reads."""

    def __init__(self) -> None:
        self.reads: list[str] = []

    async def read_file(self, path: str) -> bytes:
        self.reads.append(path)
        return await super().read_file(path)


def middleware(
    workdir: Any, selections: list[Any], backend: Any = None, **params: Any
) -> tuple[AgenticMemoryMiddleware, ScriptedModel]:
    model = ScriptedModel(selections, model="retrieval")
    mw = AgenticMemoryMiddleware(
        workdir=workdir, parameters=Params(retrieval_model=model, **params), backend=backend
    )
    return mw, model


# -- AgenticMemoryMiddleware: files ---------------------------------------------------------------


async def test_malformed_and_missing_frontmatter_still_list(tmp_path: Path) -> None:
    memory = tmp_path / "Memory"
    memory.mkdir()
    (memory / "none.md").write_text("just text, no frontmatter")
    (memory / "unclosed.md").write_text("---\ndescription: never closed\ntype: user\n")
    (memory / "garbage.md").write_text("---\n: : :\n- [list]\n  nested: x\n---\nbody")
    (memory / "empty.md").write_text("")
    (memory / "crlf.md").write_text("---\r\ndescription: windows\r\n---\r\nbody", newline="")
    mw, _ = middleware(tmp_path, [])
    headers = {h.filename: h for h in await mw.list_memory_files()}
    assert set(headers) == {"none.md", "unclosed.md", "garbage.md", "empty.md", "crlf.md"}
    assert headers["none.md"].description is None
    assert headers["unclosed.md"].description is None
    assert headers["garbage.md"].description is None
    assert headers["garbage.md"].type is None
    assert headers["empty.md"].description is None
    assert headers["crlf.md"].description == "windows"


async def test_non_utf8_files_and_index_are_decoded_with_replacement(tmp_path: Path) -> None:
    memory = tmp_path / "Memory"
    memory.mkdir()
    (memory / "MEMORY.md").write_bytes(b"- [bin](bin.md) \xff\xfe hook\n")
    (memory / "bin.md").write_bytes(b"---\ndescription: caf\xe9\n---\n\x80\x81 payload")
    mw, model = middleware(tmp_path, [selection_of(["bin.md"])])
    prompt = await mw.on_system_prompt(None, "base")
    assert "- [bin](bin.md) \ufffd\ufffd hook" in prompt
    [header] = await mw.list_memory_files()
    assert header.description == "caf\ufffd"
    hint = await mw.retrieve(None, "q")
    assert hint is not None
    assert "\ufffd\ufffd payload" in hint
    assert len(model.requests) == 1


async def test_huge_file_is_cut_for_the_manifest_and_the_hint(tmp_path: Path) -> None:
    memory = tmp_path / "Memory"
    memory.mkdir()
    body = "---\ndescription: big one\n---\n" + "x" * 2_000_000
    (memory / "big.md").write_text(body)
    mw, _ = middleware(
        tmp_path,
        [selection_of(["big.md"])],
        retrieval_max_tokens_per_md=100,
        retrieval_max_tokens_per_frontmatter=4,
    )
    [header] = await mw.list_memory_files()
    assert header.description is None  # the 16-byte head cuts the frontmatter off
    hint = await mw.retrieve(None, "q")
    assert hint is not None
    content = hint.split(":\n\n", 1)[1]
    assert body.startswith(content)
    assert len(content.encode()) <= 400 + 2  # ~100 tokens (rounded estimate)


async def test_a_file_deleted_after_the_listing_is_skipped(tmp_path: Path) -> None:
    memory = tmp_path / "Memory"
    memory.mkdir()
    (memory / "gone.md").write_text("GONE")
    (memory / "kept.md").write_text("KEPT")

    def select_then_delete(request: ScriptedRequest) -> ChatResponse:
        (memory / "gone.md").unlink()  # between the manifest and the read
        return selection_of(["gone.md", "kept.md"])

    mw, _ = middleware(tmp_path, [select_then_delete])
    hint = await mw.retrieve(None, "q")
    assert hint is not None
    assert "KEPT" in hint
    assert "GONE" not in hint
    assert "gone.md" not in hint


async def test_a_file_vanishing_during_the_listing_is_left_out() -> None:
    class Vanishing(MemBackend):
        async def stat_mtime(self, path: str) -> float | None:
            if path.endswith("gone.md"):
                raise FileNotFoundError(path)
            return await super().stat_mtime(path)

    backend = Vanishing({"/w/Memory/gone.md": (b"G", 1.0), "/w/Memory/kept.md": (b"K", 2.0)})
    mw, _ = middleware("/w", [], backend=backend)
    assert [h.filename for h in await mw.list_memory_files()] == ["kept.md"]


@pytest.mark.parametrize(
    "names",
    [
        ["../secret.md"],
        ["../../outside/secret.md"],
        ["sub/../../secret.md"],
        ["./ok.md/../../secret.md"],
        ["/etc/passwd"],
        ["MEMORY.md"],
        ["missing.md", "ok.md\x00"],
        "ok.md",  # not a list
        [None, 3, {"name": "ok.md"}, ["ok.md"]],
    ],
)
async def test_selected_names_outside_the_manifest_are_never_read(
    tmp_path: Path, names: Any
) -> None:
    (tmp_path / "secret.md").write_text("TOP SECRET")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.md").write_text("TOP SECRET")
    memory = tmp_path / "w" / "Memory"
    memory.mkdir(parents=True)
    (memory / "ok.md").write_text("fine")
    (memory / "sub").mkdir()
    (memory / "sub" / "x.md").write_text("x")
    backend = RecordingLocal()
    mw, _ = middleware(tmp_path / "w", [selection_of(names)], backend=backend)
    try:
        hint = await mw.retrieve(None, "q")
    except Exception:  # a schema-violating answer may fail the selection_of: also no read
        hint = None
    assert hint is None or "TOP SECRET" not in hint
    root = os.path.realpath(memory) + os.sep
    assert backend.reads
    assert all(os.path.realpath(p).startswith(root) for p in backend.reads)


async def test_directory_symlinks_out_of_the_memory_dir_are_not_walked(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("---\ndescription: SECRET\n---\nTOP SECRET")
    memory = tmp_path / "w" / "Memory"
    memory.mkdir(parents=True)
    (memory / "ok.md").write_text("fine")
    os.symlink(outside, memory / "linked")
    backend = RecordingLocal()
    mw, _ = middleware(
        tmp_path / "w", [selection_of(["linked/secret.md", "ok.md"])], backend=backend
    )
    assert [h.filename for h in await mw.list_memory_files()] == ["ok.md"]
    hint = await mw.retrieve(None, "q")
    assert hint is not None
    assert "TOP SECRET" not in hint
    assert all("secret" not in p for p in backend.reads)


async def test_index_truncation_keeps_whole_multibyte_characters(tmp_path: Path) -> None:
    memory = tmp_path / "Memory"
    memory.mkdir()
    lines = [f"- [日本語 {i}](f{i}.md) — é ✓ 🙂" for i in range(200)]
    index = "\n".join(lines)
    (memory / "MEMORY.md").write_text(index, encoding="utf-8")
    mw, _ = middleware(tmp_path, [], memory_max_tokens=50)
    prompt = await mw.on_system_prompt(None, "base")
    shown = prompt.split("## MEMORY.md\n", 1)[1]
    kept_text, notice = shown.split("\n<<<TRUNCATED>>>\n", 1)
    assert index.startswith(kept_text)
    assert "\ufffd" not in kept_text
    assert round(len(kept_text.encode()) / 4) <= 50
    kept = len(kept_text.split("\n"))
    assert f"The remaining {200 - kept} lines" in notice
    assert f"offset `{kept}`" in notice


async def test_index_over_budget_in_one_multibyte_char(tmp_path: Path) -> None:
    memory = tmp_path / "Memory"
    memory.mkdir()
    (memory / "MEMORY.md").write_text("🙂" * 10, encoding="utf-8")  # 40 bytes = 10 tokens
    mw, _ = middleware(tmp_path, [], memory_max_tokens=1)
    prompt = await mw.on_system_prompt(None, "base")
    shown = prompt.split("## MEMORY.md\n", 1)[1]
    assert "\ufffd" not in shown
    assert "<<<TRUNCATED>>>" in shown


# -- AgenticMemoryMiddleware: replies -------------------------------------------------------------


async def test_retrieval_running_when_the_reply_parks_is_cancelled_and_not_restarted(
    autojump_clock: trio.testing.MockClock,
) -> None:
    state = {"asked": 0, "cancelled": 0}
    retrieving = trio.Event()

    async def stuck(request: ScriptedRequest) -> ChatResponse:
        state["asked"] += 1
        retrieving.set()
        try:
            await trio.sleep_forever()
        finally:
            state["cancelled"] += 1
        raise AssertionError("unreachable")

    async def ask_once_retrieving(request: ScriptedRequest) -> list[ChatResponse]:
        # The reply parks only after the retrieval started: otherwise trio's scheduling order
        # decides whether the retrieval ever ran before the park cancelled it.
        await retrieving.wait()
        return call("ask")

    backend = MemBackend({"/w/Memory/user_profile.md": (SHORT_PROFILE.encode(), time.time())})
    mw, retrieval_model = middleware("/w", [stuck], backend=backend)
    toolkit = Toolkit()

    async def ask() -> str:
        """Needs the user's confirmation."""
        return "asked"

    toolkit.register_function(ask)  # no permission: the engine asks the user
    agent, _ = make_agent([ask_once_retrieving, text("done")], toolkit=toolkit, middlewares=[mw])
    rec = Recorder()
    await agent.reply(user("job?"), on_event=rec)
    parked = rec.events[-1]
    assert isinstance(parked, RequireUserConfirmEvent)
    assert state == {"asked": 1, "cancelled": 1}

    rec2 = Recorder()
    answer = UserConfirmResultEvent(
        confirm_results=[ConfirmResult(confirmed=True, tool_call=parked.tool_calls[0])]
    )
    final = await agent.reply(answer, on_event=rec2)
    assert final.get_text_content() == "done"
    assert [str(e.finished_reason) for e in rec2.ends] == ["completed"]
    assert state == {"asked": 1, "cancelled": 1}  # the resume starts no retrieval
    assert len(retrieval_model.requests) == 1
    assert hint_texts(agent) == []


async def test_back_to_back_replies_get_no_stale_hint(
    autojump_clock: trio.testing.MockClock,
) -> None:
    backend = MemBackend(
        {
            "/w/Memory/first.md": (b"FIRST MEMORY", time.time()),
            "/w/Memory/second.md": (b"SECOND MEMORY", time.time()),
        }
    )
    mw, _ = middleware("/w", [selection_of(["first.md"]), selection_of([])], backend=backend)
    toolkit = Toolkit()
    agent_box: list[Any] = []

    async def recall() -> str:
        """Wait for the memory retrieval."""
        await mw.wait_retrieval(agent_box[0])
        return "recalled"

    toolkit.register_function(recall, is_concurrency_safe=False, permission=ALLOW)
    # Reply 1 answers in one slow step: its retrieval finishes but is never consumed.
    model = ScriptedModel([text("one"), call("recall"), text("two")], chunk_delay=5.0)
    agent, _ = make_agent(model=model, toolkit=toolkit, middlewares=[mw])
    agent_box.append(agent)
    first = await agent.reply(user("first"))
    assert first.get_text_content() == "one"
    assert hint_texts(agent) == []
    second = await agent.reply(user("second"))
    assert second.get_text_content() == "two"
    assert hint_texts(agent) == []  # reply 1's unconsumed result never shows up in reply 2


async def test_two_agents_back_to_back_on_one_middleware_each_get_their_own_hint(
    autojump_clock: trio.testing.MockClock,
) -> None:
    backend = MemBackend(
        {"/w/Memory/a.md": (b"ALPHA", time.time()), "/w/Memory/b.md": (b"BETA", time.time())}
    )
    mw, _ = middleware("/w", [selection_of(["a.md"]), selection_of(["b.md"])], backend=backend)
    agents: list[Any] = []
    for _ in range(2):
        toolkit = Toolkit()
        box: list[Any] = []

        async def recall(box: list[Any] = box) -> str:
            """Wait for the memory retrieval."""
            await mw.wait_retrieval(box[0])
            return "ok"

        toolkit.register_function(recall, is_concurrency_safe=False, permission=ALLOW)
        agent, _ = make_agent([call("recall"), text("done")], toolkit=toolkit, middlewares=[mw])
        box.append(agent)
        agents.append(agent)
    for agent in agents:
        await agent.reply(user("q"))
    [a_hint] = hint_texts(agents[0])
    [b_hint] = hint_texts(agents[1])
    assert "ALPHA" in a_hint
    assert "BETA" not in a_hint
    assert "BETA" in b_hint
    assert "ALPHA" not in b_hint


# -- found by this hunt, fixed ---------------------------------------------------------------------


async def test_symlinked_file_escaping_the_memory_dir_is_never_read(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("---\ndescription: SECRET\n---\nTOP SECRET")
    memory = tmp_path / "w" / "Memory"
    memory.mkdir(parents=True)
    (memory / "ok.md").write_text("fine")
    (memory / "inner.md").write_text("inside")
    os.symlink(outside / "secret.md", memory / "evil.md")
    os.symlink(memory / "inner.md", memory / "alias.md")  # a link that stays inside is fine
    backend = RecordingLocal()
    mw, _ = middleware(tmp_path / "w", [selection_of(["evil.md", "ok.md"])], backend=backend)
    assert sorted(h.filename for h in await mw.list_memory_files()) == [
        "alias.md",
        "inner.md",
        "ok.md",
    ]
    hint = await mw.retrieve(None, "q")
    assert hint is not None
    assert "TOP SECRET" not in hint
    root = os.path.realpath(memory) + os.sep
    assert all(os.path.realpath(p).startswith(root) for p in backend.reads)


async def test_relative_listing_entry_escaping_the_memory_dir_is_ignored() -> None:
    backend = MemBackend({"/w/Memory/ok.md": (b"fine", 2.0), "/w/secret.md": (b"TOP SECRET", 1.0)})

    async def list_dir(path: str, recursive: bool = False) -> list[str]:
        return ["ok.md", "../secret.md"]

    backend.list_dir = list_dir  # type: ignore[method-assign]
    mw, _ = middleware("/w", [selection_of(["../secret.md"])], backend=backend)
    assert [h.filename for h in await mw.list_memory_files()] == ["ok.md"]
    hint = await mw.retrieve(None, "q")
    assert hint is None or "TOP SECRET" not in hint
    assert all(posixpath.normpath(p).startswith("/w/Memory/") for p in backend.reads)
