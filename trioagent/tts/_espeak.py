"""``EspeakTTSModel``: local speech synthesis with eSpeak NG, no network and no key.

The model runs ``espeak-ng --stdout -v <voice> -s <speed> <text>`` with ``trio.run_process``
and returns its WAV.  When the ``espeak-ng`` program is not on ``PATH`` it runs our bundled
stand-in instead, ``python -m trioagent.tts._espeak_cli`` (same arguments), which drives the
libespeak-ng shared library shipped by the PyPI package ``espeakng-loader``.  With neither,
synthesis raises :class:`EspeakNotFoundError`, which says how to install one.

A cancelled synthesis kills the process (``trio.run_process`` waits for it to exit, so no
process outlives the call).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import struct
import subprocess
import sys
from typing import ClassVar

import trio

from ..exception import ModelTimeoutError
from ..types import ErrorType
from ._base import TTSEmit, TTSError, TTSModelBase, TTSResponse

__all__ = ["EspeakError", "EspeakNotFoundError", "EspeakTTSModel", "fix_wav_sizes"]

INSTALL_HINT = "install it with `apt-get install espeak-ng`, or `pip install 'trioagent[espeak]'`"
FALLBACK_MODULE = "trioagent.tts._espeak_cli"


class EspeakError(TTSError):
    """The synthesis program failed or did not produce a WAV."""


class EspeakNotFoundError(EspeakError):
    """Neither the ``espeak-ng`` program nor the ``espeakng-loader`` fallback is available."""

    error_type = ErrorType.SETUP


async def _kill(process: trio.Process) -> None:
    """Cancellation delivery: espeak has nothing to save, so kill at once."""
    process.kill()


def fix_wav_sizes(data: bytes) -> bytes:
    """Patch the RIFF and ``data`` chunk sizes of a WAV written to a pipe.

    ``espeak-ng --stdout`` cannot seek back, so its header announces a huge placeholder
    length; this sets both sizes to what was actually written.  Non-WAV input is returned
    unchanged.
    """
    if len(data) < 12 or data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        return data
    out = bytearray(data)
    struct.pack_into("<I", out, 4, len(out) - 8)
    offset = 12
    while offset + 8 <= len(out):
        chunk_id = bytes(out[offset : offset + 4])
        size = struct.unpack_from("<I", out, offset + 4)[0]
        if chunk_id == b"data":
            struct.pack_into("<I", out, offset + 4, len(out) - offset - 8)
            break
        offset += 8 + size + (size & 1)
    return bytes(out)


class EspeakTTSModel(TTSModelBase):
    """eSpeak NG text to speech (standard mode; WAV output, ``audio/wav``).

    Args:
        voice: an espeak-ng voice (``"en"``, ``"en-us"``, ``"de"``, ``"zh"``, ...).
        speed: words per minute (80 to 450).
        pitch: 0 to 99 (``None``: the voice's default).
        amplitude: volume, 0 to 200 (``None``: the default).
        program: the program to run (a name looked up on ``PATH``, or a path).  ``None``
            finds ``espeak-ng`` on ``PATH`` and otherwise uses the bundled fallback; an
            explicit program is used as given, with no fallback.
        fallback: allow the ``espeakng-loader`` fallback when ``espeak-ng`` is missing.
        timeout: seconds one synthesis may take (``None``: no limit).
    """

    type: ClassVar[str] = "espeak_tts"

    def __init__(
        self,
        voice: str = "en",
        *,
        speed: int = 175,
        pitch: int | None = None,
        amplitude: int | None = None,
        program: str | os.PathLike[str] | None = None,
        fallback: bool = True,
        timeout: float | None = 30.0,
    ) -> None:
        super().__init__("espeak-ng", stream=False)
        if not 80 <= speed <= 450:
            raise ValueError(f"speed must be in [80, 450] words per minute, got {speed}")
        if pitch is not None and not 0 <= pitch <= 99:
            raise ValueError(f"pitch must be in [0, 99], got {pitch}")
        if amplitude is not None and not 0 <= amplitude <= 200:
            raise ValueError(f"amplitude must be in [0, 200], got {amplitude}")
        if timeout is not None and timeout <= 0:
            raise ValueError("timeout must be > 0 or None")
        self.voice = voice
        self.speed = speed
        self.pitch = pitch
        self.amplitude = amplitude
        self.program = os.fspath(program) if program is not None else None
        self.fallback = fallback
        self.timeout = timeout

    def options(self) -> list[str]:
        """The espeak-ng options (shared by the program and the fallback)."""
        args = ["--stdout", "-v", self.voice, "-s", str(self.speed)]
        if self.pitch is not None:
            args += ["-p", str(self.pitch)]
        if self.amplitude is not None:
            args += ["-a", str(self.amplitude)]
        return args

    def command(self, text: str) -> list[str]:
        """The argv that synthesizes ``text``.

        Raises:
            EspeakNotFoundError: nothing to run.
        """
        # A text starting with "-" would be read as an option; a leading space is not spoken.
        spoken = f" {text}" if text.startswith("-") else text
        if self.program is not None:
            found = shutil.which(self.program)
            if found is None:
                raise EspeakNotFoundError(
                    f"the speech program {self.program!r} was not found (not on PATH or not "
                    f"executable); {INSTALL_HINT}"
                )
            return [found, *self.options(), spoken]
        found = shutil.which("espeak-ng")
        if found is not None:
            return [found, *self.options(), spoken]
        if self.fallback and importlib.util.find_spec("espeakng_loader") is not None:
            return [sys.executable, "-m", FALLBACK_MODULE, *self.options(), spoken]
        raise EspeakNotFoundError(
            "the espeak-ng program was not found on PATH"
            + (" and the espeakng-loader package is not installed" if self.fallback else "")
            + f"; {INSTALL_HINT}"
        )

    async def _synthesize(self, text: str, emit: TTSEmit) -> None:
        if not text.strip():
            return
        argv = self.command(text)
        deadline = self.timeout if self.timeout is not None else float("inf")
        with trio.move_on_after(deadline) as scope:
            try:
                result = await trio.run_process(
                    argv,
                    stdin=subprocess.DEVNULL,
                    capture_stdout=True,
                    capture_stderr=True,
                    check=False,
                    deliver_cancel=_kill,
                )
            except FileNotFoundError as exc:  # removed between the lookup and the start
                raise EspeakNotFoundError(
                    f"the speech program {argv[0]!r} could not be started ({exc}); {INSTALL_HINT}"
                ) from exc
        if scope.cancelled_caught:
            raise ModelTimeoutError(f"espeak-ng took longer than {self.timeout}s")
        program = os.path.basename(argv[0]) if argv[0] != sys.executable else FALLBACK_MODULE
        if result.returncode != 0:
            detail = result.stderr.decode("utf-8", "replace").strip()[-500:]
            error = EspeakError(
                f"{program} exited with status {result.returncode}: {detail or 'no message'}"
            )
            if result.returncode == 3 and program == FALLBACK_MODULE:
                raise EspeakNotFoundError(f"{error.message}; {INSTALL_HINT}")
            raise error
        audio = fix_wav_sizes(result.stdout)
        if audio[:4] != b"RIFF" or audio[8:12] != b"WAVE":
            raise EspeakError(f"{program} did not write a WAV ({len(audio)} bytes on stdout)")
        await emit(TTSResponse.from_audio(audio, "audio/wav"))
