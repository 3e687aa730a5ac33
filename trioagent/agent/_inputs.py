"""Reply inputs: telling new messages from resume events, and replacing attachments the model
cannot read with a note the model can."""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence

from ..event import ExternalExecutionResultEvent, UserConfirmResultEvent, UserInterruptEvent
from ..message import ContentBlock, DataBlock, Msg, TextBlock, URLSource
from ._protocol import ReplyInputs

__all__ = ["classify_inputs", "convert_unsupported"]


def classify_inputs(
    inputs: ReplyInputs,
) -> tuple[
    UserConfirmResultEvent | ExternalExecutionResultEvent | UserInterruptEvent | None, list[Msg]
]:
    if inputs is None:
        return None, []
    if isinstance(
        inputs, UserConfirmResultEvent | ExternalExecutionResultEvent | UserInterruptEvent
    ):
        return inputs, []
    if isinstance(inputs, Msg):
        return None, [inputs]
    if isinstance(inputs, str):
        raise TypeError("reply() takes a Msg, not a str; wrap it: UserMsg('user', text)")
    if isinstance(inputs, Sequence):
        return None, list(inputs)
    raise TypeError(f"unsupported reply input: {type(inputs).__name__}")


def convert_unsupported(block: ContentBlock, patterns: Sequence[str]) -> ContentBlock:
    if not isinstance(block, DataBlock):
        return block
    media_type = block.source.media_type
    if any(fnmatch.fnmatch(media_type, p) for p in patterns):
        return block
    named = f"named '{block.name}' " if block.name else ""
    if isinstance(block.source, URLSource):
        text = (
            f"<system-reminder>An attached file {named}is saved into {block.source.url}."
            "</system-reminder>"
        )
    else:
        text = (
            f"<system-reminder>An unsupported input file {named}is attached with media type "
            f"'{media_type}'.</system-reminder>"
        )
    return TextBlock(text=text)
