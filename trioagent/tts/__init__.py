"""Text-to-speech models, used by
:class:`~trioagent.middleware.TTSMiddleware`.

* :class:`TTSModelBase` — standard mode (``synthesize(text)``) and realtime mode
  (``session()``: ``push`` text deltas, ``flush``), audio through ``emit`` callbacks.
* :class:`OpenAITTSModel` — ``POST /audio/speech`` over httpx2, streaming the body.
* :class:`EspeakTTSModel` — local eSpeak NG (the ``espeak-ng`` program, or the
  ``espeakng-loader`` library through a bundled stand-in), no network.
"""

from ._base import (
    StreamingTTSSession as StreamingTTSSession,
    TTSEmit as TTSEmit,
    TTSError as TTSError,
    TTSModelBase as TTSModelBase,
    TTSResponse as TTSResponse,
    TTSSession as TTSSession,
    TTSUsage as TTSUsage,
)
from ._espeak import (
    EspeakError as EspeakError,
    EspeakNotFoundError as EspeakNotFoundError,
    EspeakTTSModel as EspeakTTSModel,
)
from ._openai import OpenAITTSModel as OpenAITTSModel

__all__ = [
    "EspeakError",
    "EspeakNotFoundError",
    "EspeakTTSModel",
    "OpenAITTSModel",
    "StreamingTTSSession",
    "TTSEmit",
    "TTSError",
    "TTSModelBase",
    "TTSResponse",
    "TTSSession",
    "TTSUsage",
]
