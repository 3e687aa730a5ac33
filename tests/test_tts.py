"""Speech models (trioagent/tts): the base class in standard and realtime mode, the
StreamingTTSSession receiver task, OpenAITTSModel over the real loopback server, and
EspeakTTSModel producing real WAV audio through a real subprocess."""

from __future__ import annotations

import base64
import io
import os
import struct
import sys
import textwrap
import wave
from functools import partial
from pathlib import Path

import pytest
import trio
import trio.testing
from tts_kit import PCM, ChannelRealtimeTTS, DirectRealtimeTTS, FakeTTS

from trioagent.credential import OpenAICredential
from trioagent.exception import (
    ModelAuthenticationError,
    ModelInvalidRequestError,
    ModelTimeoutError,
)
from trioagent.testing import (
    OpenAICompatibleServer,
    RecordedRequest,
    ScriptedResponse,
    serve_openai_compatible,
)
from trioagent.tts import (
    EspeakError,
    EspeakNotFoundError,
    EspeakTTSModel,
    OpenAITTSModel,
    TTSError,
    TTSModelBase,
    TTSResponse,
)
from trioagent.tts._espeak import fix_wav_sizes

KEY = "sk-speech-0123456789"


class Collector:
    def __init__(self) -> None:
        self.chunks: list[TTSResponse] = []

    async def __call__(self, chunk: TTSResponse) -> None:
        self.chunks.append(chunk)

    @property
    def audio(self) -> bytes:
        return b"".join(c.audio for c in self.chunks)


def wav_duration(data: bytes) -> float:
    with wave.open(io.BytesIO(data)) as wav:
        return wav.getnframes() / wav.getframerate()


# -- TTSResponse ---------------------------------------------------------------------------------


def test_response_helpers() -> None:
    response = TTSResponse.from_audio(b"\x00\x01", "audio/wav")
    assert response.audio == b"\x00\x01"
    assert response.media_type == "audio/wav"
    assert response.has_audio
    assert not response.is_last
    assert response.content is not None
    assert response.content.source.data == base64.b64encode(b"\x00\x01").decode()  # type: ignore[union-attr]
    empty = TTSResponse()
    assert (empty.audio, empty.media_type, empty.has_audio, empty.is_last) == (
        b"",
        None,
        False,
        True,
    )


# -- TTSModelBase, standard mode ---------------------------------------------------------------


async def test_synthesize_emits_chunks_and_returns_the_whole_audio() -> None:
    model = FakeTTS([b"AAAA", None, b"", b"BBBB"])
    got = Collector()
    response = await model.synthesize("Hello world", got)
    assert model.texts == ["Hello world"]
    assert [c.audio for c in got.chunks] == [b"AAAA", b"BBBB"]  # empty chunks skipped
    assert all(not c.is_last for c in got.chunks)
    assert response.is_last
    assert response.audio == b"AAAABBBB"
    assert response.media_type == "audio/wav"
    assert response.usage is not None
    assert response.usage.time >= 0


async def test_synthesize_without_audio_returns_no_content() -> None:
    response = await FakeTTS([None]).synthesize("x")
    assert response.content is None
    assert response.is_last


async def test_synthesize_takes_text_only() -> None:
    with pytest.raises(TypeError, match="takes a str"):
        await FakeTTS().synthesize(None)  # type: ignore[arg-type]


def test_a_standard_model_has_no_session() -> None:
    with pytest.raises(TypeError, match="standard"):
        FakeTTS().session()


async def test_the_base_class_is_abstract() -> None:
    with pytest.raises(NotImplementedError):
        await TTSModelBase("m").synthesize("x")


# -- realtime mode and StreamingTTSSession ------------------------------------------------------


async def test_a_realtime_model_synthesizes_through_one_session() -> None:
    model = DirectRealtimeTTS()
    response = await model.synthesize("Hi")
    assert model.log == ["open", "push:Hi", "flush", "close"]
    assert response.audio == b"<Hi>DRAIN"


async def test_push_does_not_wait_and_flush_delivers_the_rest_in_order(
    autojump_clock: trio.testing.MockClock,
) -> None:
    model = ChannelRealtimeTTS(latency=1.0)
    got = Collector()
    async with model.session() as session:
        assert model.log == ["connect"]
        start = trio.current_time()
        await session.push("Hello ", got)
        await session.push("world", got)
        assert trio.current_time() == start  # push never waits for audio
        assert got.chunks == []
        await session.flush(got)
        assert got.audio == b"<Hello ><world><end>"
        # Audio that arrived meanwhile is handed out by the next push.
        await session.push("again", got)
        await trio.sleep(5)
        await session.push("more", got)
        assert got.audio.endswith(b"<again>")
        await session.flush(got)
        assert got.audio.endswith(b"<again><more><end>")
    assert model.log[-1] == "close"
    assert all(c.media_type == PCM for c in got.chunks)


async def test_a_receiver_failure_is_raised_in_the_callers_task(
    autojump_clock: trio.testing.MockClock,
) -> None:
    model = ChannelRealtimeTTS(fail_on="boom")
    got = Collector()
    async with model.session() as session:
        await session.push("ok", got)
        await session.push("boom", got)
        with pytest.raises(RuntimeError, match="provider failed on 'boom'"):
            await session.flush(got)
    assert got.audio == b"<ok>"
    assert model.log[-1] == "close"


async def test_a_provider_hang_up_during_flush_is_a_tts_error(
    autojump_clock: trio.testing.MockClock,
) -> None:
    model = ChannelRealtimeTTS(hang_up_after_flush=True)
    got = Collector()
    async with model.session() as session:
        await session.flush(got)
        with pytest.raises(TTSError, match="closed the session"):
            await session.flush(got)


async def test_a_connect_failure_is_raised_by_entering_the_session(
    autojump_clock: trio.testing.MockClock,
) -> None:
    model = ChannelRealtimeTTS(connect_error=ConnectionRefusedError("no route"))
    with pytest.raises(ConnectionRefusedError, match="no route"):
        async with model.session():
            pytest.fail("the session must not open")  # pragma: no cover


async def test_cancelling_a_flush_ends_the_receiver_and_closes_the_connection(
    autojump_clock: trio.testing.MockClock,
) -> None:
    model = ChannelRealtimeTTS(latency=10.0)
    got = Collector()
    with trio.move_on_after(15) as scope:
        async with model.session() as session:
            await session.push("slow", got)
            await session.flush(got)
    assert scope.cancelled_caught
    assert got.chunks == []
    assert model.log == ["connect", "close"]


async def test_a_session_must_be_entered_first() -> None:
    session = ChannelRealtimeTTS().session()
    with pytest.raises(RuntimeError, match="async with"):
        await session.push("x", Collector())


# -- OpenAITTSModel over HTTP ---------------------------------------------------------------------


@pytest.fixture
async def server(nursery: trio.Nursery) -> OpenAICompatibleServer:
    server: OpenAICompatibleServer = await nursery.start(
        partial(serve_openai_compatible, [], api_key=KEY)
    )
    return server


def speech_route(server: OpenAICompatibleServer, answer: ScriptedResponse) -> list[RecordedRequest]:
    seen: list[RecordedRequest] = []

    def handler(request: RecordedRequest) -> ScriptedResponse:
        seen.append(request)
        return answer

    server.add_route("POST", "/v1/audio/speech", handler)
    return seen


async def test_openai_tts_request_and_streamed_audio(server: OpenAICompatibleServer) -> None:
    seen = speech_route(
        server, ScriptedResponse(body=[b"RIFF", b"....", b"WAVE"], media_type="audio/wav")
    )
    got = Collector()
    async with OpenAITTSModel(
        credential=server.credential(), voice="coral", speed=1.25, instructions="cheerful"
    ) as model:
        response = await model.synthesize("Hello there", got)
    (request,) = seen
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.body == {
        "model": "gpt-4o-mini-tts",
        "input": "Hello there",
        "voice": "coral",
        "response_format": "wav",
        "speed": 1.25,
        "instructions": "cheerful",
    }
    assert got.audio == b"RIFF....WAVE"
    assert {c.media_type for c in got.chunks} == {"audio/wav"}
    assert response.audio == b"RIFF....WAVE"


async def test_openai_tts_streams_chunks_before_the_body_ends(
    server: OpenAICompatibleServer,
) -> None:
    speech_route(server, ScriptedResponse(body=[b"first", b"never"], stall_after=1))
    first = trio.Event()
    got = Collector()

    async def on_chunk(chunk: TTSResponse) -> None:
        await got(chunk)
        first.set()

    model = OpenAITTSModel(credential=server.credential(), response_format="pcm")
    async with model, trio.open_nursery() as nursery:
        nursery.start_soon(model.synthesize, "Hi", on_chunk)
        await first.wait()  # the first chunk arrived while the server still sends
        nursery.cancel_scope.cancel()
    assert got.audio == b"first"
    assert got.chunks[0].media_type == "audio/pcm;rate=24000"
    await server.wait_all_closed()  # the cancelled synthesis closed its connection
    assert server.connections[0].closed_by_client


async def test_openai_tts_without_streaming_emits_once(server: OpenAICompatibleServer) -> None:
    speech_route(server, ScriptedResponse(body=[b"ab", b"cd"], media_type="audio/mpeg"))
    got = Collector()
    async with OpenAITTSModel(
        "tts-1", credential=server.credential(), response_format="mp3", stream=False
    ) as model:
        await model.synthesize("x", got)
    assert [c.audio for c in got.chunks] == [b"abcd"]
    assert got.chunks[0].media_type == "audio/mpeg"


async def test_openai_tts_errors_are_typed(server: OpenAICompatibleServer) -> None:
    speech_route(
        server,
        ScriptedResponse.json(
            {"error": {"message": "Unknown voice 'x'.", "code": "bad_voice"}}, 400
        ),
    )
    async with OpenAITTSModel(credential=server.credential(), voice="x") as model:
        with pytest.raises(ModelInvalidRequestError, match="Unknown voice"):
            await model.synthesize("x")
    wrong = OpenAICredential(api_key="sk-wrong-99999", base_url=server.base_url)
    async with OpenAITTSModel(credential=wrong) as model:
        with pytest.raises(ModelAuthenticationError) as info:
            await model.synthesize("x")
    assert "sk-wrong-99999" not in str(info.value)


def test_openai_tts_validates_its_options() -> None:
    with pytest.raises(ValueError, match="response_format"):
        OpenAITTSModel(response_format="ogg")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="speed"):
        OpenAITTSModel(speed=9)
    assert OpenAITTSModel(response_format="opus").media_type == "audio/ogg"


# -- EspeakTTSModel: real subprocesses ------------------------------------------------------------


def fake_program(directory: Path, body: str, name: str = "espeak-ng") -> Path:
    """An executable Python script standing in for espeak-ng."""
    path = directory / name
    path.write_text(f"#!{sys.executable}\n" + textwrap.dedent(body))
    path.chmod(0o755)
    return path


def streaming_wav(frames: int, rate: int = 22050) -> bytes:
    """A WAV as espeak-ng writes it to a pipe: placeholder sizes in the header."""
    fmt = struct.pack("<HHIIHH", 1, 1, rate, rate * 2, 2, 16)
    return (
        b"RIFF"
        + struct.pack("<I", 0x7FFFF024)
        + b"WAVE"
        + b"fmt "
        + struct.pack("<I", 16)
        + fmt
        + b"data"
        + struct.pack("<I", 0x7FFFF000)
        + b"\x01\x00" * frames
    )


async def test_espeak_fallback_produces_a_real_wav(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No espeak-ng on PATH: the model runs `python -m trioagent.tts._espeak_cli`, which drives
    # libespeak-ng from the espeakng-loader package (a dev dependency).
    monkeypatch.setenv("PATH", str(tmp_path))
    model = EspeakTTSModel(voice="en", speed=175)
    assert model.command("Hi")[:3] == [sys.executable, "-m", "trioagent.tts._espeak_cli"]
    got = Collector()
    response = await model.synthesize("Hello from trio agent.", got)
    audio = response.audio
    assert audio[:4] == b"RIFF"
    assert audio[8:12] == b"WAVE"
    assert response.media_type == "audio/wav"
    assert wav_duration(audio) > 0.3
    assert got.audio == audio


async def test_espeak_default_produces_a_real_wav() -> None:
    # Whatever is installed (the program, else the fallback) yields a playable WAV.
    response = await EspeakTTSModel(speed=300).synthesize("Two words.")
    assert response.audio[:4] == b"RIFF"
    assert wav_duration(response.audio) > 0


async def test_espeak_program_on_path_is_run_with_espeak_arguments(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    argv_file = tmp_path / "argv.txt"
    fake_program(
        tmp_path,
        f"""
        import sys
        open({str(argv_file)!r}, "w").write("\\n".join(sys.argv[1:]))
        sys.stdout.buffer.write({streaming_wav(2205)!r})
        """,
    )
    monkeypatch.setenv("PATH", str(tmp_path))
    model = EspeakTTSModel(voice="de", speed=200, pitch=40, amplitude=120)
    response = await model.synthesize("-5 Grad")
    assert argv_file.read_text().split("\n") == [
        "--stdout",
        "-v",
        "de",
        "-s",
        "200",
        "-p",
        "40",
        "-a",
        "120",
        " -5 Grad",
    ]
    # The placeholder sizes of a piped WAV are fixed up: the file parses, 0.1 s long.
    assert wav_duration(response.audio) == pytest.approx(0.1)


async def test_espeak_missing_program_error_is_clear(tmp_path: Path) -> None:
    missing = tmp_path / "bin" / "espeak-ng"
    model = EspeakTTSModel(program=missing)
    with pytest.raises(EspeakNotFoundError) as info:
        await model.synthesize("hello")
    message = str(info.value)
    assert str(missing) in message
    assert "apt-get install espeak-ng" in message
    assert "pip install 'trioagent[espeak]'" in message
    assert info.value.error_type == "setup"


async def test_espeak_with_neither_program_nor_fallback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(EspeakNotFoundError, match="espeak-ng program was not found on PATH"):
        await EspeakTTSModel(fallback=False).synthesize("hello")


async def test_espeak_failure_reports_the_programs_message(tmp_path: Path) -> None:
    program = fake_program(
        tmp_path, "import sys\nsys.stderr.write('unknown voice xx\\n')\nsys.exit(1)\n"
    )
    with pytest.raises(EspeakError, match="exited with status 1: unknown voice xx"):
        await EspeakTTSModel(program=program).synthesize("hello")
    not_wav = fake_program(tmp_path, "import sys\nsys.stdout.write('hello')\n", name="fake")
    with pytest.raises(EspeakError, match="did not write a WAV"):
        await EspeakTTSModel(program=not_wav).synthesize("hello")


async def test_espeak_blank_text_runs_nothing(tmp_path: Path) -> None:
    model = EspeakTTSModel(program=tmp_path / "absent")  # would fail if it were run
    response = await model.synthesize("  \n")
    assert response.content is None


async def test_cancelling_espeak_kills_the_process(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    program = fake_program(
        tmp_path,
        f"""
        import os, time
        open({str(pid_file)!r}, "w").write(str(os.getpid()))
        time.sleep(60)
        """,
    )
    model = EspeakTTSModel(program=program)
    started = trio.current_time()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(model.synthesize, "hello")
        while not (pid_file.exists() and pid_file.read_text()):
            await trio.sleep(0.01)  # real time: waiting for a real process to start
        nursery.cancel_scope.cancel()
    assert trio.current_time() - started < 10
    pid = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # killed and reaped: no such process


async def test_espeak_timeout(tmp_path: Path) -> None:
    program = fake_program(tmp_path, "import time\ntime.sleep(60)\n")
    with pytest.raises(ModelTimeoutError, match=r"longer than 0\.2s"):
        await EspeakTTSModel(program=program, timeout=0.2).synthesize("hello")


def test_espeak_validates_its_options() -> None:
    with pytest.raises(ValueError, match="speed"):
        EspeakTTSModel(speed=10)
    with pytest.raises(ValueError, match="pitch"):
        EspeakTTSModel(pitch=100)
    assert EspeakTTSModel().stream is False


def test_fix_wav_sizes_leaves_other_data_alone() -> None:
    assert fix_wav_sizes(b"ID3 mp3 data") == b"ID3 mp3 data"
    fixed = fix_wav_sizes(streaming_wav(10))
    assert struct.unpack_from("<I", fixed, 4)[0] == len(fixed) - 8
    assert struct.unpack_from("<I", fixed, 40)[0] == 20
