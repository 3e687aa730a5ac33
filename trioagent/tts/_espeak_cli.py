"""A tiny stand-in for the ``espeak-ng`` program, for machines that lack it.

``python -m trioagent.tts._espeak_cli --stdout -v en -s 175 "Hello world"`` writes a WAV file
to stdout, synthesized with the libespeak-ng shared library that the PyPI package
``espeakng-loader`` ships (loaded with ``ctypes``).  It accepts the subset of ``espeak-ng``'s
options that :class:`~trioagent.tts.EspeakTTSModel` uses, so the model runs either program with
the same arguments.  Without a text argument the text is read from stdin.

Runs as its own process (started with ``trio.run_process``), so a cancelled synthesis is a
killed process and the library's global state never lives in the caller.  Only the standard
library and ``espeakng_loader`` are used here.

Exit codes: 0 success, 2 bad arguments, 3 ``espeakng-loader`` missing, 4 library failure.
"""

from __future__ import annotations

import argparse
import ctypes
import importlib
import io
import sys
import wave
from collections.abc import Sequence

__all__ = ["EXIT_LIBRARY_ERROR", "EXIT_NO_LOADER", "main", "synthesize_wav"]

EXIT_NO_LOADER = 3
EXIT_LIBRARY_ERROR = 4

# espeak_AUDIO_OUTPUT, espeak_PARAMETER, flags and errors from speak_lib.h.
_AUDIO_OUTPUT_SYNCHRONOUS = 2
_INITIALIZE_DONT_EXIT = 0x8000
_POS_CHARACTER = 1
_CHARS_UTF8 = 1
_RATE, _VOLUME, _PITCH = 1, 2, 3
_EE_OK = 0

_SynthCallback = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.c_void_p
)


class EspeakLibraryError(RuntimeError):
    """libespeak-ng refused a call."""


def _load() -> tuple[ctypes.CDLL, str]:
    # Imported by name at run time (no stubs; ImportError when the package is missing).
    espeakng_loader = importlib.import_module("espeakng_loader")
    library = ctypes.CDLL(espeakng_loader.get_library_path())
    return library, str(espeakng_loader.get_data_path())


def synthesize_wav(
    text: str,
    *,
    voice: str = "en",
    speed: int = 175,
    pitch: int | None = None,
    amplitude: int | None = None,
) -> bytes:
    """Synthesize ``text``; return a complete 16-bit mono WAV at the library's sample rate."""
    lib, data_path = _load()
    lib.espeak_Initialize.restype = ctypes.c_int
    lib.espeak_Initialize.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
    lib.espeak_SetSynthCallback.argtypes = [_SynthCallback]
    lib.espeak_SetVoiceByName.argtypes = [ctypes.c_char_p]
    lib.espeak_SetParameter.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int]
    lib.espeak_Synth.argtypes = [
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.c_uint,
        ctypes.c_int,
        ctypes.c_uint,
        ctypes.c_uint,
        ctypes.POINTER(ctypes.c_uint),
        ctypes.c_void_p,
    ]
    rate = lib.espeak_Initialize(
        _AUDIO_OUTPUT_SYNCHRONOUS, 0, data_path.encode(), _INITIALIZE_DONT_EXIT
    )
    if rate <= 0:
        raise EspeakLibraryError(f"espeak_Initialize failed ({rate}) with data at {data_path}")
    samples: list[bytes] = []

    def on_audio(wav: ctypes._Pointer[ctypes.c_short], count: int, events: int | None) -> int:
        if wav and count > 0:
            samples.append(ctypes.string_at(wav, count * 2))
        return 0  # 0: continue synthesizing

    callback = _SynthCallback(on_audio)  # kept alive until espeak_Terminate
    try:
        lib.espeak_SetSynthCallback(callback)
        if lib.espeak_SetVoiceByName(voice.encode()) != _EE_OK:
            raise EspeakLibraryError(f"unknown espeak-ng voice {voice!r}")
        settings = [(_RATE, speed), (_PITCH, pitch), (_VOLUME, amplitude)]
        for parameter, value in settings:
            if value is not None and lib.espeak_SetParameter(parameter, value, 0) != _EE_OK:
                raise EspeakLibraryError(f"espeak_SetParameter({parameter}, {value}) failed")
        encoded = text.encode("utf-8")
        status = lib.espeak_Synth(
            encoded, len(encoded) + 1, 0, _POS_CHARACTER, 0, _CHARS_UTF8, None, None
        )
        if status != _EE_OK:
            raise EspeakLibraryError(f"espeak_Synth failed ({status})")
        lib.espeak_Synchronize()
    finally:
        lib.espeak_Terminate()
    out = io.BytesIO()
    with wave.open(out, "wb") as wav_file:
        wav_file.setnchannels(1)
        wav_file.setsampwidth(2)
        wav_file.setframerate(rate)
        wav_file.writeframes(b"".join(samples))
    return out.getvalue()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m trioagent.tts._espeak_cli",
        description="espeak-ng stand-in: synthesize text to a WAV on stdout via libespeak-ng.",
    )
    parser.add_argument("--stdout", action="store_true", help="write the WAV to stdout")
    parser.add_argument("-w", dest="wav_file", help="write the WAV to this file")
    parser.add_argument("-v", dest="voice", default="en", help="voice name (default: en)")
    parser.add_argument("-s", dest="speed", type=int, default=175, help="words per minute")
    parser.add_argument("-p", dest="pitch", type=int, default=None, help="pitch, 0-99")
    parser.add_argument("-a", dest="amplitude", type=int, default=None, help="amplitude, 0-200")
    parser.add_argument("text", nargs="?", help="the text (default: read stdin)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    text = args.text if args.text is not None else sys.stdin.read()
    try:
        audio = synthesize_wav(
            text, voice=args.voice, speed=args.speed, pitch=args.pitch, amplitude=args.amplitude
        )
    except ImportError:
        print(
            "espeakng-loader is not installed: pip install 'trioagent[espeak]' "
            "(or install the espeak-ng program: apt-get install espeak-ng)",
            file=sys.stderr,
        )
        return EXIT_NO_LOADER
    except (OSError, EspeakLibraryError) as exc:
        print(f"libespeak-ng failed: {exc}", file=sys.stderr)
        return EXIT_LIBRARY_ERROR
    if args.wav_file:
        with open(args.wav_file, "wb") as handle:
            handle.write(audio)
    if args.stdout or not args.wav_file:
        sys.stdout.buffer.write(audio)
        sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
