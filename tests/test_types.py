"""Enumerations, ``ErrorInfo``, ``ToolChoice`` and the id/timestamp factories."""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Iterator
from datetime import datetime

import attrs
import pytest

from trioagent import types
from trioagent._core import ids as _ids
from trioagent.event import ReplyStartEvent
from trioagent.message import TextBlock
from trioagent.types import (
    ErrorInfo,
    ErrorType,
    FinishedReason,
    ReplyEndReason,
    ReplyFinishedReason,
    ToolChoice,
    generate_id,
    generate_timestamp,
    set_id_factory,
    set_timestamp_factory,
)


@pytest.fixture
def restore_factories() -> Iterator[None]:
    """Whatever a test installs, the default factories are back afterwards."""
    try:
        yield
    finally:
        set_id_factory(None)
        set_timestamp_factory(None)


def test_reply_finished_reason_values() -> None:
    assert [r.value for r in ReplyFinishedReason] == [
        "completed",
        "interrupted",
        "exceed_max_iters",
        "error",
    ]
    assert ReplyFinishedReason("error") is ReplyFinishedReason.ERROR
    assert str(ReplyFinishedReason.COMPLETED) == "completed"
    assert isinstance(ReplyFinishedReason.COMPLETED, str)


def test_reply_end_reason_is_a_deprecated_alias() -> None:
    assert ReplyEndReason is ReplyFinishedReason


def test_finished_reason_values() -> None:
    assert {r.value for r in FinishedReason} == {
        "interrupted",
        "completed",
        "max_tokens",
        "content_filter",
    }


def test_error_type_values() -> None:
    assert [t.value for t in ErrorType] == [
        "authentication",
        "permission",
        "rate_limit",
        "invalid_request",
        "upstream",
        "connection",
        "internal",
        "setup",
        "unknown",
    ]


def test_error_info() -> None:
    info = ErrorInfo(message="boom")
    assert info.type is ErrorType.UNKNOWN
    assert ErrorInfo(type="rate_limit", message="m").type is ErrorType.RATE_LIMIT
    with pytest.raises(ValueError, match="catastrophe"):
        ErrorInfo(type="catastrophe", message="m")
    with pytest.raises(TypeError):
        ErrorInfo()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        ErrorInfo("unknown", "m")  # type: ignore[call-arg]  # keyword-only
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        info.message = "other"  # type: ignore[misc]
    assert info == ErrorInfo(type=ErrorType.UNKNOWN, message="boom")


@pytest.mark.parametrize("mode", ["auto", "none", "required", "search"])
def test_tool_choice_modes(mode: str) -> None:
    assert ToolChoice(mode).mode == mode
    assert ToolChoice(mode).tools is None


def test_tool_choice_default_is_auto() -> None:
    assert ToolChoice() == ToolChoice("auto", None)


@pytest.mark.parametrize("mode", ["", None, 3])
def test_tool_choice_rejects_bad_modes(mode: object) -> None:
    with pytest.raises(ValueError, match="mode"):
        ToolChoice(mode)  # type: ignore[arg-type]


def test_tool_choice_forced_name_must_be_whitelisted() -> None:
    assert ToolChoice("search", ["search", "read"]).tools == ["search", "read"]
    with pytest.raises(ValueError, match="write"):
        ToolChoice("write", ["search"])
    for keyword in ("auto", "none", "required"):
        assert ToolChoice(keyword, ["search"]).mode == keyword
        assert ToolChoice(keyword, []).tools == []


def test_tool_choice_is_frozen() -> None:
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        ToolChoice().mode = "none"  # type: ignore[misc]


def test_default_id_and_timestamp() -> None:
    assert re.fullmatch(r"[0-9a-f]{32}", generate_id())
    assert generate_id() != generate_id()
    stamp = datetime.fromisoformat(generate_timestamp())
    assert stamp.tzinfo is None  # local, naive, as in AgentScope
    assert abs((datetime.now() - stamp).total_seconds()) < 60


def test_set_id_factory_replaces_and_restores(restore_factories: None) -> None:
    counter = itertools.count(1)
    set_id_factory(lambda: f"id-{next(counter)}")
    assert generate_id() == "id-1"
    assert TextBlock(text="x").id == "id-2"
    event = ReplyStartEvent(session_id="s", reply_id="r", name="n")
    assert event.id == "id-3"
    set_id_factory(None)
    assert re.fullmatch(r"[0-9a-f]{32}", TextBlock(text="x").id)


def test_set_timestamp_factory_replaces_and_restores(restore_factories: None) -> None:
    set_timestamp_factory(lambda: "2000-01-01T00:00:00")
    assert generate_timestamp() == "2000-01-01T00:00:00"
    assert TextBlock(text="x").created_at == "2000-01-01T00:00:00"
    assert ReplyStartEvent(session_id="s", reply_id="r", name="n").created_at == (
        "2000-01-01T00:00:00"
    )
    set_timestamp_factory(None)
    assert generate_timestamp() != "2000-01-01T00:00:00"
    datetime.fromisoformat(generate_timestamp())


def test_factories_are_the_same_through_every_import_path() -> None:
    assert types.set_id_factory is _ids.set_id_factory
    assert types.generate_timestamp is _ids.generate_timestamp


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX-only")
def test_forked_children_generate_distinct_ids() -> None:
    """Each child writes the ids it generates to a pipe; the parent compares them."""
    types.generate_id()  # the parent's generator has state the children inherit
    batches: list[list[str]] = []
    for _ in range(2):
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: write its ids and leave without running the parent's cleanup
            try:
                os.close(read_end)
                payload = "\n".join(types.generate_id() for _ in range(50)).encode()
                os.write(write_end, payload)
            finally:
                os._exit(0)
        os.close(write_end)
        with os.fdopen(read_end, "rb") as pipe:
            batches.append(pipe.read().decode().split("\n"))
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
    first, second = batches
    assert len(first) == len(second) == 50
    assert all(re.fullmatch(r"[0-9a-f]{32}", i) for i in first + second)
    assert not set(first) & set(second)
    assert not set(first + second) & {types.generate_id() for _ in range(50)}
