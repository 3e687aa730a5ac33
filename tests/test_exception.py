"""Exception families, their ``str()``, ``error_info`` classification, and the one root:
every exception class trioagent defines derives from ``TrioagentError``."""

from __future__ import annotations

import importlib
import inspect
import pathlib
import pkgutil

import pytest
import trio

from trioagent.exception import (
    AgentOrientedException,
    DeveloperOrientedException,
    MissingExtraError,
    ModelAuthenticationError,
    ModelConnectionError,
    ModelError,
    ModelInvalidRequestError,
    ModelPermissionError,
    ModelRateLimitError,
    ModelStreamError,
    ModelTimeoutError,
    ModelUpstreamError,
    StructuredOutputError,
    ToolGroupInactiveError,
    ToolInterruptedError,
    ToolJSONDecodeError,
    ToolNotFoundError,
    TrioagentError,
    error_info,
)
from trioagent.types import ErrorInfo, ErrorType

AGENT_ORIENTED = [
    ToolNotFoundError,
    ToolInterruptedError,
    ToolJSONDecodeError,
    ToolGroupInactiveError,
]


@pytest.mark.parametrize("cls", [AgentOrientedException, *AGENT_ORIENTED])
def test_agent_oriented_str_names_the_class(cls: type[AgentOrientedException]) -> None:
    exc = cls("tool 'x' is missing")
    assert str(exc) == f"{cls.__name__}: tool 'x' is missing"
    assert exc.message == "tool 'x' is missing"
    assert exc.args == ("tool 'x' is missing",)
    assert isinstance(exc, AgentOrientedException)
    assert not isinstance(exc, DeveloperOrientedException)


def test_structured_output_error_is_developer_oriented() -> None:
    assert issubclass(StructuredOutputError, DeveloperOrientedException)
    assert not issubclass(StructuredOutputError, AgentOrientedException)


@pytest.mark.parametrize(
    ("cls", "kind", "retryable"),
    [
        (ModelError, ErrorType.UNKNOWN, False),
        (ModelAuthenticationError, ErrorType.AUTHENTICATION, False),
        (ModelPermissionError, ErrorType.PERMISSION, False),
        (ModelRateLimitError, ErrorType.RATE_LIMIT, True),
        (ModelInvalidRequestError, ErrorType.INVALID_REQUEST, False),
        (ModelUpstreamError, ErrorType.UPSTREAM, True),
        (ModelConnectionError, ErrorType.CONNECTION, True),
        (ModelTimeoutError, ErrorType.CONNECTION, True),
        (ModelStreamError, ErrorType.UPSTREAM, False),
    ],
)
def test_model_errors_are_classified(
    cls: type[ModelError], kind: ErrorType, retryable: bool
) -> None:
    exc = cls("went wrong", status_code=500, code="c1")
    assert exc.retryable is retryable
    assert cls("x", retryable=not retryable).retryable is (not retryable)
    assert error_info(exc) == ErrorInfo(type=kind, message="HTTP 500 went wrong (code: c1)")


def test_model_error_fields_and_str() -> None:
    exc = ModelRateLimitError(
        "slow down", status_code=429, code="rate_limit_exceeded", retry_after=2.5
    )
    assert (exc.message, exc.status_code, exc.code, exc.retry_after) == (
        "slow down",
        429,
        "rate_limit_exceeded",
        2.5,
    )
    assert str(exc) == "HTTP 429 slow down (code: rate_limit_exceeded)"
    assert str(ModelConnectionError("refused")) == "refused"
    assert ModelConnectionError("refused").retry_after is None


@pytest.mark.parametrize(
    "exc",
    [
        DeveloperOrientedException("bad config"),
        StructuredOutputError("no output"),
        TypeError("bad arg"),
        ValueError("bad value"),
        RuntimeError("dropped twice"),
    ],
)
def test_programming_errors_are_internal(exc: Exception) -> None:
    info = error_info(exc)
    assert info.type is ErrorType.INTERNAL
    assert info.message == f"{type(exc).__name__}: {exc}"


@pytest.mark.parametrize("exc", [KeyError("k"), OSError("disk"), ToolNotFoundError("x")])
def test_other_errors_are_unknown(exc: Exception) -> None:
    info = error_info(exc)
    assert info.type is ErrorType.UNKNOWN
    assert type(exc).__name__ in info.message


def test_group_with_one_leaf_is_classified_by_the_leaf() -> None:
    group = ExceptionGroup("wrapped", [ModelRateLimitError("slow", status_code=429)])
    assert error_info(group) == ErrorInfo(type=ErrorType.RATE_LIMIT, message="HTTP 429 slow")
    nested = ExceptionGroup("outer", [ExceptionGroup("inner", [ValueError("v")])])
    assert error_info(nested) == ErrorInfo(type=ErrorType.INTERNAL, message="ValueError: v")


def test_group_with_several_leaves_is_unknown() -> None:
    group = ExceptionGroup("two", [ValueError("a"), ModelUpstreamError("b")])
    assert error_info(group).type is ErrorType.UNKNOWN


async def test_cancelled_leaves_are_ignored() -> None:
    cancelled: list[trio.Cancelled] = []
    with trio.CancelScope() as scope:
        scope.cancel()
        try:
            await trio.lowlevel.checkpoint()
        except trio.Cancelled as exc:
            cancelled.append(exc)
            raise
    assert scope.cancelled_caught
    group = BaseExceptionGroup("mixed", [cancelled[0], ModelAuthenticationError("no key")])
    assert error_info(group) == ErrorInfo(type=ErrorType.AUTHENTICATION, message="no key")


# -- one root -----------------------------------------------------------------------------------

ROOT = pathlib.Path(__file__).resolve().parent.parent
#: Signals that never leave the library (each caught where it is raised, or inside the espeak
#: helper process): not under TrioagentError, so no ``except TrioagentError`` can swallow them.
#: docs/errors.md names them.
INTERNAL_SIGNALS = {
    "trioagent.agent._reply.StopReply",
    "trioagent.testing._server_wire.Abort",
    "trioagent.testing._server_wire.ClientGone",
    "trioagent.tts._espeak_cli.EspeakLibraryError",
}


def _exception_classes() -> dict[str, type[BaseException]]:
    """Every exception class defined in a trioagent module, by qualified name."""
    import trioagent

    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(trioagent.__path__, "trioagent."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__ == info.name
            ):
                found[f"{value.__module__}.{value.__qualname__}"] = value
    return found


def test_every_exception_class_derives_from_trioagent_error() -> None:
    classes = _exception_classes()
    assert len(classes) > 40  # the walk found the library's classes
    outside = {name for name, cls in classes.items() if not issubclass(cls, TrioagentError)}
    assert outside == INTERNAL_SIGNALS


def test_docs_draw_every_exception_class() -> None:
    doc = (ROOT / "docs" / "errors.md").read_text()
    missing = {name for name in _exception_classes() if name.rsplit(".", 1)[1] not in doc}
    assert not missing


def test_the_root_is_exported_from_the_package() -> None:
    import trioagent

    assert trioagent.TrioagentError is TrioagentError
    assert "TrioagentError" in trioagent.__all__


def test_a_timeout_is_also_a_timeout_error() -> None:
    exc = ModelTimeoutError("read stalled", retryable=True)
    assert isinstance(exc, TimeoutError)
    assert isinstance(exc, ModelConnectionError)
    assert str(exc) == "read stalled"
    assert exc.retryable
    assert error_info(exc).type is ErrorType.CONNECTION
    with pytest.raises(TimeoutError):
        raise exc


def test_builtin_kinds_are_kept_under_the_root() -> None:
    from trioagent.serialization import SerializationError
    from trioagent.skill import SkillFormatError
    from trioagent.testing import SweepViolation

    assert issubclass(SerializationError, ValueError)
    assert issubclass(SkillFormatError, ValueError)
    assert issubclass(SweepViolation, AssertionError)
    assert issubclass(MissingExtraError, ImportError)


def test_a_missing_extra_is_a_setup_error() -> None:
    exc = MissingExtraError("trioagent.mcp", "mcp", module="mcp")
    assert str(exc) == "trioagent.mcp needs the 'mcp' extra: pip install 'trioagent[mcp]'"
    assert (exc.feature, exc.extra, exc.name) == ("trioagent.mcp", "mcp", "mcp")
    assert error_info(exc).type is ErrorType.SETUP
