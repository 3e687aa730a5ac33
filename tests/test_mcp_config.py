"""``StdioMCPConfig`` and ``HttpMCPConfig``: validation, and secrets kept out of their reprs."""

from __future__ import annotations

import pytest

from trioagent.mcp import HttpMCPConfig, StdioMCPConfig


def test_stdio_config_validates() -> None:
    config = StdioMCPConfig(command="server", args=["--flag", "x"])
    assert config.args == ("--flag", "x")
    with pytest.raises(ValueError, match="command"):
        StdioMCPConfig(command="")
    with pytest.raises(TypeError, match="args"):
        StdioMCPConfig(command="server", args="--flag")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="str to str"):
        StdioMCPConfig(command="server", env={"N": 1})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="encoding_error_handler"):
        StdioMCPConfig(command="server", encoding_error_handler="lenient")  # type: ignore[arg-type]


def test_http_config_validates() -> None:
    assert HttpMCPConfig(url="https://example.com/mcp").timeout == 30.0
    assert HttpMCPConfig(url="http://h/mcp", timeout=None).timeout is None
    with pytest.raises(ValueError, match="http"):
        HttpMCPConfig(url="ftp://example.com")
    with pytest.raises(ValueError, match="timeout"):
        HttpMCPConfig(url="http://h/mcp", timeout=0)


def test_secrets_never_appear_in_a_repr() -> None:
    stdio = StdioMCPConfig(command="server", env={"API_KEY": "sk-secret-1"})
    http = HttpMCPConfig(
        url="https://user:sk-secret-2@example.com/mcp",
        headers={"Authorization": "Bearer sk-secret-3"},
    )
    assert "sk-secret" not in repr(stdio)
    assert "API_KEY" in repr(stdio)
    assert "sk-secret" not in repr(http)
    assert "Authorization" in repr(http)
    assert "https://***@example.com/mcp" in repr(http)


def test_the_http_transport_is_chosen_by_path_or_by_name() -> None:
    assert not HttpMCPConfig(url="http://h/mcp").uses_sse
    assert HttpMCPConfig(url="http://h/sse?key=1").uses_sse
    assert HttpMCPConfig(url="http://h/messages/").uses_sse
    assert HttpMCPConfig(url="http://h/events", transport="sse").uses_sse
    assert not HttpMCPConfig(url="http://h/sse", transport="streamable_http").uses_sse
    with pytest.raises(ValueError, match="transport"):
        HttpMCPConfig(url="http://h/mcp", transport="websocket")  # type: ignore[arg-type]
