"""Adversarial edge cases of the long-term-memory middlewares: AgenticMemoryMiddleware
(trioagent/middleware/_agentic_memory.py) and Mem0Middleware / Mem0PlatformClient
(trioagent/middleware/_mem0.py, _mem0_client.py)."""

from __future__ import annotations

import json
import logging
import os
import posixpath
import time
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
import trio.testing
from agent_helpers import ALLOW, Recorder, make_agent, user

from trioagent.event import ConfirmResult, RequireUserConfirmEvent, UserConfirmResultEvent
from trioagent.message import HintBlock, TextBlock, ToolCallBlock
from trioagent.middleware import (
    AgenticMemoryMiddleware,
    LocalBackend,
    Mem0APIError,
    Mem0Middleware,
    Mem0PlatformClient,
)
from trioagent.model import ChatResponse
from trioagent.testing import (
    OpenAICompatibleServer,
    RecordedRequest,
    ScriptedModel,
    ScriptedRequest,
    ScriptedResponse,
    serve_openai_compatible,
)
from trioagent.tool import Toolkit
from trioagent.types import ReplyFinishedReason

Params = AgenticMemoryMiddleware.Parameters
PROFILE = (
    "---\nname: user profile\ndescription: When answering about the user's job\n"
    "type: user\n---\n\nThe user is a marine biologist.\n"
)
KEY = "m0-very-secret-key-0123456789"


def text(value: str) -> ChatResponse:
    return ChatResponse(content=[TextBlock(text=value)])


def call(name: str, call_id: str = "call-1") -> ChatResponse:
    return ChatResponse(content=[ToolCallBlock(id=call_id, name=name, input="{}")])


def selection(names: Any) -> ChatResponse:
    return ChatResponse(
        content=[
            ToolCallBlock(
                id="sel",
                name="generate_structured_output",
                input=json.dumps({"selected_files": names}),
            )
        ]
    )


def hints(agent: Any) -> list[str]:
    return [str(b.hint) for m in agent.state.context for b in m.content if isinstance(b, HintBlock)]


class RecordingLocal(LocalBackend):
    """The local backend, recording every path it reads."""

    def __init__(self) -> None:
        self.reads: list[str] = []

    async def read_file(self, path: str) -> bytes:
        self.reads.append(path)
        return await super().read_file(path)


class MemBackend:
    """An in-memory posix backend (no threads: safe with the autojump clock)."""

    def __init__(self, files: dict[str, tuple[bytes, float | None]]) -> None:
        self.files = dict(files)
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
    mw, model = middleware(tmp_path, [selection(["bin.md"])])
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
        [selection(["big.md"])],
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
        return selection(["gone.md", "kept.md"])

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
    mw, _ = middleware(tmp_path / "w", [selection(names)], backend=backend)
    try:
        hint = await mw.retrieve(None, "q")
    except Exception:  # a schema-violating answer may fail the selection: also no read
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
    mw, _ = middleware(tmp_path / "w", [selection(["linked/secret.md", "ok.md"])], backend=backend)
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

    async def stuck(request: ScriptedRequest) -> ChatResponse:
        state["asked"] += 1
        try:
            await trio.sleep_forever()
        finally:
            state["cancelled"] += 1
        raise AssertionError("unreachable")

    backend = MemBackend({"/w/Memory/user_profile.md": (PROFILE.encode(), time.time())})
    mw, retrieval_model = middleware("/w", [stuck], backend=backend)
    toolkit = Toolkit()

    async def ask() -> str:
        """Needs the user's confirmation."""
        return "asked"

    toolkit.register_function(ask)  # no permission: the engine asks the user
    agent, _ = make_agent([call("ask"), text("done")], toolkit=toolkit, middlewares=[mw])
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
    assert hints(agent) == []


async def test_back_to_back_replies_get_no_stale_hint(
    autojump_clock: trio.testing.MockClock,
) -> None:
    backend = MemBackend(
        {
            "/w/Memory/first.md": (b"FIRST MEMORY", time.time()),
            "/w/Memory/second.md": (b"SECOND MEMORY", time.time()),
        }
    )
    mw, _ = middleware("/w", [selection(["first.md"]), selection([])], backend=backend)
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
    assert hints(agent) == []
    second = await agent.reply(user("second"))
    assert second.get_text_content() == "two"
    assert hints(agent) == []  # reply 1's unconsumed result never shows up in reply 2


async def test_two_agents_back_to_back_on_one_middleware_each_get_their_own_hint(
    autojump_clock: trio.testing.MockClock,
) -> None:
    backend = MemBackend(
        {"/w/Memory/a.md": (b"ALPHA", time.time()), "/w/Memory/b.md": (b"BETA", time.time())}
    )
    mw, _ = middleware("/w", [selection(["a.md"]), selection(["b.md"])], backend=backend)
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
    [a_hint] = hints(agents[0])
    [b_hint] = hints(agents[1])
    assert "ALPHA" in a_hint
    assert "BETA" not in a_hint
    assert "BETA" in b_hint
    assert "ALPHA" not in b_hint


# -- Mem0 ---------------------------------------------------------------------------------------


async def start_server(nursery: trio.Nursery) -> OpenAICompatibleServer:
    server: OpenAICompatibleServer = await nursery.start(partial(serve_openai_compatible, []))
    return server


def host_of(server: OpenAICompatibleServer) -> str:
    return f"http://{server.host}:{server.port}"


def ok_add(request: RecordedRequest) -> ScriptedResponse:
    return ScriptedResponse.json({"results": [{"id": "1", "event": "ADD"}]})


@pytest.mark.parametrize(
    "answer",
    [
        ScriptedResponse(
            status=500, body=f"boom, your key is {KEY}".encode(), media_type="text/plain"
        ),
        ScriptedResponse.json({"error": {"message": f"bad key {KEY}", "code": KEY}}, status=401),
        ScriptedResponse.json({"detail": f"Token {KEY} rejected"}, status=403),
        ScriptedResponse(status=200, body=b"{not json", media_type="application/json"),
        ScriptedResponse(status=200, body=f"<html>{KEY}</html>".encode(), media_type="text/html"),
    ],
)
async def test_a_failing_search_over_http_keeps_the_reply_and_hides_the_key(
    nursery: trio.Nursery, caplog: pytest.LogCaptureFixture, answer: ScriptedResponse
) -> None:
    server = await start_server(nursery)
    server.add_route("POST", "/v2/memories/search/", lambda request: answer)
    adds: list[RecordedRequest] = []

    def add(request: RecordedRequest) -> ScriptedResponse:
        adds.append(request)
        return ok_add(request)

    server.add_route("POST", "/v1/memories/", add)
    async with Mem0PlatformClient(KEY, host=host_of(server)) as client:
        mw = Mem0Middleware(user_id="alice", client=client, mode="static_control")
        agent, _ = make_agent([text("answer")], middlewares=[mw])
        rec = Recorder()
        with caplog.at_level(logging.DEBUG):
            msg = await agent.reply(user("hello"), on_event=rec)
        assert KEY not in repr(client)
        assert KEY not in repr(mw)
    assert msg.get_text_content() == "answer"
    assert [str(e.finished_reason) for e in rec.ends] == ["completed"]
    assert "mem0 search failed" in caplog.text
    assert KEY not in caplog.text
    assert all(KEY not in str(e) for e in rec.events)
    assert len(adds) == 1  # the write-back still happens


@pytest.mark.parametrize(
    "payload",
    [
        {"results": "not a list"},
        [1, None, {"memory": ""}, {"text": None}, {"other": "x"}],
        {"results": [{"memory": 5}, {"text": "kept"}]},
        "just a string",
        None,
        42,
    ],
)
async def test_odd_but_valid_json_search_answers(nursery: trio.Nursery, payload: Any) -> None:
    server = await start_server(nursery)
    server.add_route("POST", "/v2/memories/search/", lambda r: ScriptedResponse.json(payload))
    server.add_route("POST", "/v1/memories/", ok_add)
    async with Mem0PlatformClient(KEY, host=host_of(server)) as client:
        mw = Mem0Middleware(user_id="alice", client=client, mode="static_control")
        agent, _ = make_agent([text("answer")], middlewares=[mw])
        msg = await agent.reply(user("hello"))
    assert msg.finished_reason == ReplyFinishedReason.COMPLETED
    memory_hints = [m for m in agent.state.context if m.name == "memory"]
    if isinstance(payload, dict) and payload.get("results") == [{"memory": 5}, {"text": "kept"}]:
        [memory] = memory_hints
        assert "- 5\n- kept" in str(memory.content[0].hint)  # type: ignore[union-attr]
    else:
        assert memory_hints == []


@pytest.mark.parametrize(
    "exc",
    [
        httpx.ReadTimeout("read timed out"),
        httpx.ConnectTimeout("connect timed out"),
        httpx.ConnectError("refused"),
        httpx.RemoteProtocolError("peer closed"),
    ],
)
async def test_transport_failures_become_mem0_errors_and_the_reply_completes(
    caplog: pytest.LogCaptureFixture, exc: Exception
) -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        raise exc

    http = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    client = Mem0PlatformClient(KEY, host="http://mem0.invalid", http_client=http)
    with pytest.raises(Mem0APIError) as info:
        await client.add("x", user_id="u")
    assert info.value.status_code is None
    assert KEY not in str(info.value)
    assert KEY not in repr(info.value)
    mw = Mem0Middleware(user_id="alice", client=client, mode="static_control")
    agent, _ = make_agent([text("answer")], middlewares=[mw])
    rec = Recorder()
    with caplog.at_level(logging.WARNING, logger="trioagent.middleware"):
        msg = await agent.reply(user("hello"), on_event=rec)
    await http.aclose()
    assert msg.get_text_content() == "answer"
    assert [str(e.finished_reason) for e in rec.ends] == ["completed"]
    assert "mem0 search failed" in caplog.text
    assert "mem0 add failed" in caplog.text
    assert KEY not in caplog.text
    assert [r.headers["authorization"] for r in seen] == [f"Token {KEY}"] * 3


async def test_interrupt_during_an_http_search_ends_once_and_frees_the_connection(
    nursery: trio.Nursery,
) -> None:
    server = await start_server(nursery)
    arrived = trio.Event()
    calls = {"search": 0}

    async def search(request: RecordedRequest) -> ScriptedResponse:
        calls["search"] += 1
        if calls["search"] == 1:
            arrived.set()
            await trio.sleep_forever()
        return ScriptedResponse.json({"results": [{"memory": "Alice likes tea"}]})

    server.add_route("POST", "/v2/memories/search/", search)
    server.add_route("POST", "/v1/memories/", ok_add)
    async with Mem0PlatformClient(KEY, host=host_of(server)) as client:
        mw = Mem0Middleware(user_id="alice", client=client, mode="static_control")
        agent, model = make_agent([text("second answer")], middlewares=[mw])
        rec = Recorder()

        async def interrupt_when_the_search_arrives() -> None:
            await arrived.wait()
            agent.interrupt()

        with trio.fail_after(10):
            async with trio.open_nursery() as inner:
                inner.start_soon(interrupt_when_the_search_arrives)
                msg = await agent.reply(user("hello"), on_event=rec)
        assert msg.finished_reason == ReplyFinishedReason.INTERRUPTED
        assert rec.types == ["REPLY_START", "REPLY_END"]
        assert model.requests == []
        with trio.fail_after(10):
            await server.wait_until(lambda: server.connections[0].closed.is_set())
        assert server.connections[0].closed_by_client
        # The client is still usable: the next reply searches, answers and writes back.
        rec2 = Recorder()
        with trio.fail_after(10):
            msg2 = await agent.reply(user("again"), on_event=rec2)
    assert msg2.get_text_content() == "second answer"
    assert [str(e.finished_reason) for e in rec2.ends] == ["completed"]
    assert [r.path for r in server.requests] == [
        "/v2/memories/search/",
        "/v2/memories/search/",
        "/v1/memories/",
    ]


async def test_interrupt_during_an_http_write_back_ends_once_and_frees_the_connection(
    nursery: trio.Nursery,
) -> None:
    server = await start_server(nursery)
    arrived = trio.Event()

    async def add(request: RecordedRequest) -> ScriptedResponse:
        arrived.set()
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    server.add_route("POST", "/v2/memories/search/", lambda r: ScriptedResponse.json([]))
    server.add_route("POST", "/v1/memories/", add)
    async with Mem0PlatformClient(KEY, host=host_of(server)) as client:
        mw = Mem0Middleware(user_id="alice", client=client, mode="static_control")
        agent, _ = make_agent([text("answer")], middlewares=[mw])
        rec = Recorder()

        async def interrupt_when_the_write_arrives() -> None:
            await arrived.wait()
            agent.interrupt()

        with trio.fail_after(10):
            async with trio.open_nursery() as inner:
                inner.start_soon(interrupt_when_the_write_arrives)
                msg = await agent.reply(user("hello"), on_event=rec)
        add_connection = server.connections[-1]
        with trio.fail_after(10):
            await server.wait_until(add_connection.closed.is_set)
    assert len(rec.ends) == 1
    assert isinstance(rec.events[-1], type(rec.ends[0]))
    assert msg.get_text_content() == "answer"
    assert add_connection.closed_by_client


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
    mw, _ = middleware(tmp_path / "w", [selection(["evil.md", "ok.md"])], backend=backend)
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
    mw, _ = middleware("/w", [selection(["../secret.md"])], backend=backend)
    assert [h.filename for h in await mw.list_memory_files()] == ["ok.md"]
    hint = await mw.retrieve(None, "q")
    assert hint is None or "TOP SECRET" not in hint
    assert all(posixpath.normpath(p).startswith("/w/Memory/") for p in backend.reads)
