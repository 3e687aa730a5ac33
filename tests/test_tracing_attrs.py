"""The pure helpers behind TracingMiddleware (``trioagent/middleware/_tracing_attrs.py``).

``test_tracing_middleware.py`` checks the spans a traced agent produces; this module calls the
helpers directly: credential scrubbing, attribute cleaning, JSON conversion, messages and
responses in the OpenTelemetry GenAI shape, provider/server/request attributes, tool
definitions and the agent description.  Everything here is synchronous and offline.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import json
from types import SimpleNamespace
from typing import Any

import attrs
import pydantic
import pytest

from trioagent.agent import Agent
from trioagent.credential import AnthropicCredential, OpenAICredential
from trioagent.message import (
    Base64Source,
    DataBlock,
    HintBlock,
    Msg,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    URLSource,
)
from trioagent.middleware._tracing_attrs import (
    Scrubber,
    agent_description,
    chat_output_messages,
    clean_attributes,
    finish_reason,
    provider_name,
    request_attributes,
    secrets_of,
    server_address,
    to_json,
    to_otel_message,
    tool_definitions,
)
from trioagent.model import (
    AnthropicChatModel,
    ChatResponse,
    DashScopeChatModel,
    DeepSeekChatModel,
    GeminiChatModel,
    MiniMaxChatModel,
    MoonshotChatModel,
    OllamaChatModel,
    OpenAIChatModel,
    OpenAIResponseModel,
    XAIChatModel,
)
from trioagent.model._openai import OpenAIChatParameters
from trioagent.types import FinishedReason, ToolChoice

FAKE_KEY = "sk-FAKEKEY-0123456789abcdef"
FAKE_URL_PASSWORD = "pw-FAKEURLSECRET-42"


@pytest.fixture(autouse=True)
def _no_provider_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Credentials read keys and URLs from the environment: keep the host's out."""
    for cls in (OpenAICredential, AnthropicCredential):
        for var in (*cls.api_key_env, *cls.base_url_env):
            monkeypatch.delenv(var, raising=False)
    monkeypatch.delenv("OPENAI_ORG_ID", raising=False)


def model_named(class_name: str, **attributes: Any) -> Any:
    """An instance of a fresh class called ``class_name`` (provider detection reads the name)."""
    return type(class_name, (), attributes)()


# -- Scrubber --------------------------------------------------------------------------------------


def test_scrubber_keeps_secrets_of_four_chars_or_more_longest_first() -> None:
    scrub = Scrubber(["abc", "", "abcd", "abcd1234", "abcd", "xy-secret-long"])
    # Duplicates dropped, "abc" and "" too short, longest first.
    assert scrub.secrets == ("xy-secret-long", "abcd1234", "abcd")
    assert Scrubber().secrets == ()


@pytest.mark.parametrize(
    ("secrets", "text", "expected"),
    [
        ([FAKE_KEY], f"key is {FAKE_KEY}.", "key is ***."),
        ([FAKE_KEY], f"{FAKE_KEY}{FAKE_KEY} and {FAKE_KEY}", "****** and ***"),
        ([FAKE_KEY, FAKE_URL_PASSWORD], f"{FAKE_URL_PASSWORD}:{FAKE_KEY}", "***:***"),
        # A secret containing a shorter one is replaced whole, whatever the given order.
        (["abcd", "abcd1234"], "abcd1234 abcd", "*** ***"),
        (["abcd1234", "abcd"], "xabcd1234x", "x***x"),
        # Shorter than four characters: never a secret (it would blank common words).
        (["abc"], "abc abcd", "abc abcd"),
        (["abcd"], "abc abcd", "abc ***"),
        ([], f"nothing {FAKE_KEY}", f"nothing {FAKE_KEY}"),
        ([FAKE_KEY], "", ""),
        ([FAKE_KEY], "sk-FAKEKEY", "sk-FAKEKEY"),  # a prefix of a secret is no secret
    ],
)
def test_scrubber_replaces_known_secrets(secrets: list[str], text: str, expected: str) -> None:
    assert Scrubber(secrets)(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Bearer abc.def-ghi", "Bearer ***"),
        ("header BEARER  tok;rest", "header BEARER  ***;rest"),
        ("Authorization: Bearer tok999", "Authorization: ***"),
        ("Authorization: Basic dXNlcjpwYXNzd29yZA== next", "Authorization: *** next"),
        ("proxy-authorization: Token abc123", "proxy-authorization: ***"),
        ('{"Authorization": "ApiKey k-123", "n": 1}', '{"Authorization": "***", "n": 1}'),
        ("authorization=abc123;rest", "authorization=***;rest"),
        ("api_key=zzz9 next", "api_key=*** next"),
        ("API-KEY: zzz9", "API-KEY: ***"),
        ("apikey = 'zzz9'", "apikey = '***'"),
        ('{"api_key": "zzz9", "n": 1}', '{"api_key": "***", "n": 1}'),
        ("x-api-key: abc123", "x-api-key: ***"),
        ("x-goog-api-key: AIzaXYZ", "x-goog-api-key: ***"),
        ("access_token=abc&x=1", "access_token=***&x=1"),
        ("access-token: abc", "access-token: ***"),
        ("GET /v1/m?key=AIza123&alt=sse", "GET /v1/m?key=***&alt=sse"),
        ("https://h/p?a=1&token=zz&b=2", "https://h/p?a=1&token=***&b=2"),
        ("https://h/p?x=1&api-key=zz", "https://h/p?x=1&api-key=***"),
        # A known secret goes even where no pattern would catch it.
        (f"failed with {FAKE_KEY}", "failed with ***"),
        ("no credential here: key lime pie", "no credential here: key lime pie"),
    ],
)
def test_error_text_scrubs_credential_patterns(text: str, expected: str) -> None:
    assert Scrubber([FAKE_KEY]).error_text(text) == expected


def test_patterns_apply_to_error_texts_only() -> None:
    scrub = Scrubber([FAKE_KEY])
    assert scrub("Bearer tok999 api_key=zzz9") == "Bearer tok999 api_key=zzz9"


# -- secrets_of ------------------------------------------------------------------------------------


class ListedSecrets:
    """A credential that lists its secrets."""

    def __init__(self, *secrets: Any, base_url: str | None = None) -> None:
        self._secrets = secrets
        self.api_key = "ignored-when-secrets-exists"
        self.base_url = base_url

    def secrets(self) -> list[Any]:
        return list(self._secrets)


class BrokenSecrets:
    """A credential whose ``secrets()`` raises."""

    def __init__(self, base_url: str | None = None, api_key: str | None = None) -> None:
        self.base_url = base_url
        self.api_key = api_key

    def secrets(self) -> list[str]:
        raise RuntimeError("keyring locked")


def test_secrets_of_real_credential_key_and_url_userinfo() -> None:
    credential = OpenAICredential(
        api_key=FAKE_KEY, base_url=f"https://bot-user:{FAKE_URL_PASSWORD}@llm.example.com:8443/v1"
    )
    model = OpenAIChatModel("gpt-4o", credential=credential)
    assert secrets_of([model]) == [FAKE_KEY, FAKE_URL_PASSWORD, "bot-user"]


def test_secrets_of_includes_key_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env-123")
    model = model_named("OpenAIChatModel", credential=OpenAICredential(api_key=FAKE_KEY))
    assert secrets_of([model]) == [FAKE_KEY, "sk-from-env-123"]


@pytest.mark.parametrize(
    ("credential", "expected"),
    [
        (ListedSecrets("s1-long", "", None, 123456), ["s1-long", "123456"]),
        (ListedSecrets(), []),
        (ListedSecrets("k-1234", base_url="https://u:p@h/v1"), ["k-1234", "p", "u"]),
        # secrets() raising: the api_key attribute instead, and the base URL is still read.
        (BrokenSecrets(), []),
        (BrokenSecrets(api_key=FAKE_KEY), [FAKE_KEY]),
        (BrokenSecrets(base_url=f"https://:{FAKE_URL_PASSWORD}@h"), [FAKE_URL_PASSWORD]),
        # No secrets(): the api_key attribute, when it is a str.
        (SimpleNamespace(api_key=FAKE_KEY), [FAKE_KEY]),
        (SimpleNamespace(api_key=None), []),
        (SimpleNamespace(api_key=b"bytes-key"), []),
        (SimpleNamespace(secrets=["not", "callable"], api_key=FAKE_KEY), [FAKE_KEY]),
        # Base URL: both userinfo parts, password first; none without "@".
        (
            SimpleNamespace(base_url=f"https://alice:{FAKE_URL_PASSWORD}@h:1/v1"),
            [FAKE_URL_PASSWORD, "alice"],
        ),
        (SimpleNamespace(base_url="https://only-user@h/v1"), ["only-user"]),
        (SimpleNamespace(base_url="https://h/v1"), []),
        (SimpleNamespace(base_url="https://h/v1/@models"), []),
        (SimpleNamespace(base_url=None), []),
        (SimpleNamespace(), []),
    ],
)
def test_secrets_of_credential_shapes(credential: Any, expected: list[str]) -> None:
    assert secrets_of([SimpleNamespace(credential=credential)]) == expected


def test_secrets_of_models_without_credential_and_several_models() -> None:
    assert secrets_of([]) == []
    assert secrets_of([object(), SimpleNamespace(credential=None)]) == []
    models = [
        SimpleNamespace(credential=SimpleNamespace(api_key="first-key")),
        object(),
        SimpleNamespace(credential=BrokenSecrets()),
        SimpleNamespace(credential=ListedSecrets("second-key")),
    ]
    assert secrets_of(models) == ["first-key", "second-key"]


def test_broken_credential_does_not_break_scrubbing() -> None:
    models = [SimpleNamespace(credential=BrokenSecrets()), SimpleNamespace(api_key=FAKE_KEY)]
    scrub = Scrubber(secrets_of(models))
    assert scrub.secrets == ()
    assert scrub.error_text("api_key=abcdef") == "api_key=***"


# -- clean_attributes ------------------------------------------------------------------------------


class Shown:
    def __str__(self) -> str:
        return f"shown {FAKE_KEY}"


def test_clean_attributes() -> None:
    scrub = Scrubber([FAKE_KEY])
    cleaned = clean_attributes(
        {
            "none": None,
            "str": f"key={FAKE_KEY}",
            "empty": "",
            "true": True,
            "false": False,
            "zero": 0,
            "int": 42,
            "float": 0.5,
            "list": ["a", FAKE_KEY, 3],
            "tuple": (1, None, f"x{FAKE_KEY}"),
            "empty_list": [],
            "dict": {"k": FAKE_KEY},
            "object": Shown(),
            "enum": FinishedReason.INTERRUPTED,
        },
        scrub,
    )
    assert cleaned == {
        "str": "key=***",
        "empty": "",
        "true": True,
        "false": False,
        "zero": 0,
        "int": 42,
        "float": 0.5,
        "list": ["a", "***", "3"],
        "tuple": ["1", "None", "x***"],
        "empty_list": [],
        "dict": "{'k': '***'}",
        "object": "shown ***",
        "enum": "interrupted",
    }
    # Kept as they are: no bool became an int, no int a str.
    assert cleaned["true"] is True
    assert type(cleaned["int"]) is int


def test_clean_attributes_of_nothing() -> None:
    assert clean_attributes({}, Scrubber()) == {}
    assert clean_attributes({"a": None}, Scrubber()) == {}


# -- to_json ---------------------------------------------------------------------------------------


class Color(enum.Enum):
    RED = 1
    WHEN = datetime.date(2024, 5, 6)


@dataclasses.dataclass
class Point:
    x: int
    y: int

    def __str__(self) -> str:
        return "str of a point"


class Reading(pydantic.BaseModel):
    sensor: str
    at: datetime.datetime
    tags: list[str]


@attrs.define
class Plain:
    name: str
    ratio: float


class Opaque:
    def __str__(self) -> str:
        return "opaque thing"


UTC = datetime.UTC


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, "null"),
        ({"b": [1, 2.5, True]}, '{"b": [1, 2.5, true]}'),
        ("héllo ✓", '"héllo ✓"'),  # ensure_ascii=False
        (Color.RED, "1"),
        (Color.WHEN, '"2024-05-06"'),  # the enum's value is converted in turn
        (FinishedReason.INTERRUPTED, '"interrupted"'),  # a StrEnum is a str
        (datetime.datetime(2024, 1, 2, 3, 4, 5), '"2024-01-02T03:04:05"'),
        (datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC), '"2024-01-02T03:04:05+00:00"'),
        (datetime.date(2024, 1, 2), '"2024-01-02"'),
        (datetime.time(3, 4, 5, 600000), '"03:04:05.600000"'),
        (datetime.timedelta(minutes=1, milliseconds=500), "60.5"),
        (datetime.timedelta(0), "0.0"),
        (Plain("p", 0.25), '{"name": "p", "ratio": 0.25}'),
        (
            TextBlock(text="hi", id="b1", created_at="t0"),
            '{"type": "text", "text": "hi", "id": "b1", "created_at": "t0", "finished_at": null}',
        ),
        (
            Reading(sensor="s1", at=datetime.datetime(2024, 1, 2, tzinfo=UTC), tags=["x"]),
            '{"sensor": "s1", "at": "2024-01-02T00:00:00+00:00", "tags": ["x"]}',
        ),
        (Point(1, 2), '"Point(x=1, y=2)"'),  # repr, not str
        ({3}, "[3]"),
        (frozenset({"only"}), '["only"]'),
        (set(), "[]"),
        (Opaque(), '"opaque thing"'),
        (b"raw", "\"b'raw'\""),
        ([Color.RED, {"d": datetime.date(2000, 1, 1)}], '[1, {"d": "2000-01-01"}]'),
    ],
)
def test_to_json(value: Any, expected: str) -> None:
    assert to_json(value) == expected


def test_to_json_of_classes_is_their_str() -> None:
    assert to_json(Point) == json.dumps(str(Point))
    assert to_json(Plain) == json.dumps(str(Plain))
    assert to_json({"schema": Reading}) == json.dumps({"schema": str(Reading)})  # no model_dump()


# -- messages --------------------------------------------------------------------------------------


def test_user_message() -> None:
    msg = Msg("alice", [TextBlock(text="hi"), TextBlock(text="there")], "user")
    assert to_otel_message(msg) == {
        "role": "user",
        "parts": [{"type": "text", "content": "hi"}, {"type": "text", "content": "there"}],
        "name": "alice",
    }


def test_system_message() -> None:
    msg = Msg("system", [TextBlock(text="You are helpful.")], "system")
    assert to_otel_message(msg) == {
        "role": "system",
        "parts": [{"type": "text", "content": "You are helpful."}],
        "name": "system",
    }


def test_assistant_message_every_block_kind() -> None:
    msg = Msg(
        "bot",
        [
            ThinkingBlock(thinking="let me think"),
            TextBlock(text="checking"),
            HintBlock(hint="be brief"),
            ToolCallBlock(id="c1", name="get_weather", input='{"city": "Paris"}'),
            ToolResultBlock(id="c1", name="get_weather", output="sunny"),
            ToolCallBlock(id="c2", name="render", input=""),
            ToolResultBlock(
                id="c2",
                name="render",
                output=[
                    TextBlock(text="done"),
                    DataBlock(source=Base64Source(data="iVBORw0K", media_type="image/png")),
                ],
            ),
            DataBlock(source=URLSource(url="https://x.test/a.mp3", media_type="audio/mpeg")),
            HintBlock(hint=[TextBlock(text="hidden")]),
        ],
        "assistant",
    )
    assert to_otel_message(msg) == {
        "role": "assistant",
        "parts": [
            {"type": "reasoning", "content": "let me think"},
            {"type": "text", "content": "checking"},
            {
                "type": "tool_call",
                "id": "c1",
                "name": "get_weather",
                "arguments": {"city": "Paris"},
            },
            {"type": "tool_call_response", "id": "c1", "response": "sunny"},
            {"type": "tool_call", "id": "c2", "name": "render", "arguments": {}},
            {
                "type": "tool_call_response",
                "id": "c2",
                "response": [
                    {"type": "text", "content": "done"},
                    {
                        "type": "blob",
                        "content": "iVBORw0K",
                        "media_type": "image/png",
                        "modality": "image",
                    },
                ],
            },
            {"type": "uri", "uri": "https://x.test/a.mp3", "modality": "audio"},
        ],
        "name": "bot",
    }


def test_hint_only_message_has_no_parts() -> None:
    msg = Msg("bot", [HintBlock(hint="stop soon")], "assistant")
    assert to_otel_message(msg)["parts"] == []


@pytest.mark.parametrize(
    ("raw", "arguments"),
    [
        ('{"city": "Paris", "days": 2}', {"city": "Paris", "days": 2}),
        ('{"nested": {"a": [1, null]}}', {"nested": {"a": [1, None]}}),
        ("", {}),
        ("  \n ", {}),
        ("[1, 2]", [1, 2]),  # valid JSON, if no object, is kept decoded
        ('"text"', "text"),
        ('{"city": "Par', '{"city": "Par'),  # invalid JSON: the raw string
        ("not json", "not json"),
    ],
)
def test_tool_call_arguments(raw: str, arguments: Any) -> None:
    msg = Msg("bot", [ToolCallBlock(id="c9", name="t", input=raw)], "assistant")
    assert to_otel_message(msg)["parts"] == [
        {"type": "tool_call", "id": "c9", "name": "t", "arguments": arguments}
    ]


def test_tool_result_with_empty_block_output() -> None:
    msg = Msg("bot", [ToolResultBlock(id="c1", name="t", output=[])], "assistant")
    assert to_otel_message(msg)["parts"] == [
        {"type": "tool_call_response", "id": "c1", "response": []}
    ]


@pytest.mark.parametrize(
    ("media_type", "modality"),
    [
        ("image/png", "image"),
        ("audio/wav", "audio"),
        ("video/mp4", "video"),
        ("application/pdf", "unknown"),
        ("text/plain", "unknown"),
        ("image", "image"),
        ("", "unknown"),
    ],
)
def test_data_blocks(media_type: str, modality: str) -> None:
    blob = DataBlock(source=Base64Source(data="AAAA", media_type=media_type))
    uri = DataBlock(source=URLSource(url="file:///tmp/f", media_type=media_type))
    msg = Msg("u", [blob, uri], "user")
    assert to_otel_message(msg)["parts"] == [
        {"type": "blob", "content": "AAAA", "media_type": media_type, "modality": modality},
        {"type": "uri", "uri": "file:///tmp/f", "modality": modality},
    ]


def test_message_as_json() -> None:
    """An input message has no finish reason; an output message has the one given."""
    msg = Msg("bot", [TextBlock(text="ça marche"), ToolCallBlock(id="c", name="n")], "assistant")
    assert "finish_reason" not in to_otel_message(msg)
    assert to_json([to_otel_message(msg, "stop")]) == (
        '[{"role": "assistant", "parts": [{"type": "text", "content": "ça marche"}, '
        '{"type": "tool_call", "id": "c", "name": "n", "arguments": {}}], '
        '"name": "bot", "finish_reason": "stop"}]'
    )


# -- responses -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("response", "expected"),
    [
        (ChatResponse(content=[]), "stop"),
        (ChatResponse(finished_reason=FinishedReason.COMPLETED), "stop"),
        (
            ChatResponse(content=[TextBlock(text="a"), ToolCallBlock(id="c", name="n")]),
            "tool_calls",
        ),
        (
            ChatResponse(
                content=[ToolCallBlock(id="c", name="n")], finished_reason=FinishedReason.MAX_TOKENS
            ),
            "length",
        ),
        (ChatResponse(finished_reason=FinishedReason.INTERRUPTED), "interrupted"),
        (ChatResponse(finished_reason="interrupted", is_last=False), "interrupted"),
        (None, "unknown"),
        ("interrupted", "unknown"),
        (SimpleNamespace(finished_reason=FinishedReason.INTERRUPTED), "unknown"),
    ],
)
def test_finish_reason(response: Any, expected: str) -> None:
    assert finish_reason(response) == expected


def test_chat_output_messages() -> None:
    response = ChatResponse(
        content=[
            ThinkingBlock(thinking="plan"),
            TextBlock(text="answer"),
            ToolCallBlock(id="c1", name="search", input='{"q": "trio"}'),
            DataBlock(source=Base64Source(data="UklG", media_type="audio/wav")),
        ]
    )
    assert chat_output_messages(response) == [
        {
            "role": "assistant",
            "parts": [
                {"type": "reasoning", "content": "plan"},
                {"type": "text", "content": "answer"},
                {"type": "tool_call", "id": "c1", "name": "search", "arguments": {"q": "trio"}},
                {"type": "blob", "content": "UklG", "media_type": "audio/wav", "modality": "audio"},
            ],
            "finish_reason": "tool_call",  # the output-message schema's name for it
        }
    ]
    interrupted = ChatResponse(
        content=[TextBlock(text="partial")], finished_reason=FinishedReason.INTERRUPTED
    )
    assert chat_output_messages(interrupted) == [
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": "partial"}],
            "finish_reason": "interrupted",
        }
    ]


# -- provider and server ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("class_name", "expected"),
    [
        (AnthropicChatModel.__name__, "anthropic"),
        (DashScopeChatModel.__name__, "dashscope"),
        (DeepSeekChatModel.__name__, "deepseek"),
        (GeminiChatModel.__name__, "gcp.gemini"),
        (MiniMaxChatModel.__name__, "minimax"),
        (MoonshotChatModel.__name__, "moonshot"),
        (OllamaChatModel.__name__, "ollama"),
        (OpenAIChatModel.__name__, "openai"),
        (OpenAIResponseModel.__name__, "openai"),
        (XAIChatModel.__name__, "x_ai"),
        ("VolcengineChatModel", "volcengine"),
        ("DashScopeMultiAgentModel", "dashscope"),
        ("ScriptedModel", "unknown"),
        ("MyChatModel", "unknown"),
        ("OpenAICompatibleChatModel", "unknown"),
    ],
)
def test_provider_name_from_class_name(class_name: str, expected: str) -> None:
    assert provider_name(model_named(class_name)) == expected


@pytest.mark.parametrize(
    ("base_url", "expected"),
    [
        (None, "openai"),  # the credential's default, https://api.openai.com/v1
        ("https://api.openai.com/v1", "openai"),
        ("https://dashscope.aliyuncs.com/compatible-mode/v1", "dashscope"),
        ("https://api.deepseek.com/v1", "deepseek"),
        ("https://api.moonshot.cn/v1", "moonshot"),
        ("https://ark.cn-beijing.volces.com/api/v3", "volcengine"),
        ("https://generativelanguage.googleapis.com/v1beta/openai", "gcp.gemini"),
        ("https://my-res.openai.azure.com/openai", "azure.ai.openai"),
        ("https://bedrock-runtime.us-east-1.amazonaws.com/v1", "aws.bedrock"),
        ("https://api.x.ai/v1", "x_ai"),
        ("http://127.0.0.1:8000/v1", "openai"),
    ],
)
def test_provider_name_of_openai_compatible_hosts(base_url: str | None, expected: str) -> None:
    for class_name in ("OpenAIChatModel", "OpenAIResponseModel"):
        model = model_named(class_name, credential=OpenAICredential(base_url=base_url))
        assert provider_name(model) == expected


def test_provider_name_reads_base_url_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "https://api.deepseek.com")
    model = OpenAIChatModel("deepseek-chat", credential=OpenAICredential(api_key=FAKE_KEY))
    assert provider_name(model) == "deepseek"


class NoBaseUrl:
    """A credential whose ``get_base_url`` raises."""

    def __init__(self, base_url: Any = None) -> None:
        self.base_url = base_url

    def get_base_url(self) -> str:
        raise RuntimeError("no base URL")


@pytest.mark.parametrize(
    ("credential", "expected"),
    [
        (None, "openai"),
        (NoBaseUrl("https://api.x.ai/v1"), "x_ai"),  # falls back to the base_url attribute
        (NoBaseUrl(), "openai"),
        (NoBaseUrl(12345), "openai"),
        (SimpleNamespace(base_url="https://api.deepseek.com"), "deepseek"),  # no get_base_url
    ],
)
def test_provider_name_without_usable_base_url(credential: Any, expected: str) -> None:
    model = model_named("OpenAIChatModel", credential=credential)
    assert provider_name(model) == expected


@pytest.mark.parametrize(
    ("credential", "expected"),
    [
        (OpenAICredential(), ("api.openai.com", None)),
        (OpenAICredential(base_url="http://127.0.0.1:8000/v1"), ("127.0.0.1", 8000)),
        (
            OpenAICredential(base_url=f"https://bot:{FAKE_URL_PASSWORD}@LLM.example.com:8443/v1"),
            ("llm.example.com", 8443),
        ),
        (OpenAICredential(base_url="http://[::1]:11434"), ("::1", 11434)),
        (AnthropicCredential(), ("api.anthropic.com", None)),
        (SimpleNamespace(base_url="https://h.test:9/v1"), ("h.test", 9)),
        (NoBaseUrl("https://fallback.test"), ("fallback.test", None)),
        (NoBaseUrl(), (None, None)),
        (SimpleNamespace(base_url=""), (None, None)),
        (SimpleNamespace(base_url="http://h.test:99999/v1"), (None, None)),  # port out of range
        (SimpleNamespace(base_url="http://h.test:abc/v1"), (None, None)),
        (SimpleNamespace(base_url="http://[::1/v1"), (None, None)),  # invalid IPv6 host
        (None, (None, None)),
    ],
)
def test_server_address(credential: Any, expected: tuple[str | None, int | None]) -> None:
    assert server_address(SimpleNamespace(credential=credential)) == expected


def test_server_address_of_model_without_credential() -> None:
    assert server_address(object()) == (None, None)


# -- request attributes ----------------------------------------------------------------------------


def test_request_attributes_of_a_real_model() -> None:
    model = OpenAIChatModel(
        "gpt-4o",
        credential=OpenAICredential(api_key=FAKE_KEY),
        parameters=OpenAIChatParameters(temperature=0.5, top_p=0.25, max_tokens=64),
    )
    assert request_attributes(model, {}) == {
        "gen_ai.request.temperature": 0.5,
        "gen_ai.request.top_p": 0.25,
        "gen_ai.request.max_tokens": 64,
    }
    # The call's kwargs win over the model's parameters.
    assert request_attributes(model, {"temperature": 1.5, "seed": 7}) == {
        "gen_ai.request.temperature": 1.5,
        "gen_ai.request.top_p": 0.25,
        "gen_ai.request.max_tokens": 64,
        "gen_ai.request.seed": 7,
    }


@attrs.define
class Params:
    temperature: float | None = None
    top_k: int | None = None


@pytest.mark.parametrize(
    ("model", "kwargs", "expected"),
    [
        (object(), {}, {}),
        (
            SimpleNamespace(generate_kwargs={"temperature": 0.1, "top_k": 3}),
            {},
            {"gen_ai.request.temperature": 0.1, "gen_ai.request.top_k": 3},
        ),
        # parameters (attrs) override generate_kwargs, the call's kwargs override both.
        (
            SimpleNamespace(
                generate_kwargs={"temperature": 0.1, "seed": 3}, parameters=Params(0.9)
            ),
            {},
            {"gen_ai.request.temperature": 0.9, "gen_ai.request.seed": 3},
        ),
        (
            SimpleNamespace(generate_kwargs={"seed": 3}, parameters=Params(0.9, top_k=4)),
            {"top_k": 5, "seed": 8},
            {
                "gen_ai.request.temperature": 0.9,
                "gen_ai.request.top_k": 5,
                "gen_ai.request.seed": 8,
            },
        ),
        # Not a Mapping / not attrs: ignored.
        (
            SimpleNamespace(generate_kwargs=[("temperature", 1.0)], parameters={"top_k": 2}),
            {},
            {},
        ),
        # Aliases: the first non-None key wins.
        (object(), {"p": 0.5}, {"gen_ai.request.top_p": 0.5}),
        (object(), {"top_p": 0.7, "p": 0.5}, {"gen_ai.request.top_p": 0.7}),
        (object(), {"top_p": None, "p": 0.5}, {"gen_ai.request.top_p": 0.5}),
        (object(), {"max_output_tokens": 100}, {"gen_ai.request.max_tokens": 100}),
        (object(), {"top_p": 0}, {"gen_ai.request.top_p": 0}),
        (
            object(),
            {"presence_penalty": 0.5, "frequency_penalty": -0.5, "seed": 0},
            {
                "gen_ai.request.presence_penalty": 0.5,
                "gen_ai.request.frequency_penalty": -0.5,
                "gen_ai.request.seed": 0,
            },
        ),
        # Stop sequences: always a list of str.
        (object(), {"stop": "END"}, {"gen_ai.request.stop_sequences": ["END"]}),
        (object(), {"stop": ("a", 1)}, {"gen_ai.request.stop_sequences": ["a", "1"]}),
        (
            object(),
            {"stop_sequences": ["x"], "stop": ["y"]},
            {"gen_ai.request.stop_sequences": ["x"]},
        ),
        (object(), {"stop": []}, {"gen_ai.request.stop_sequences": []}),
        # Not a number: left out; unknown keys: left out.
        (object(), {"temperature": "hot", "max_tokens": "many"}, {}),
        (object(), {"tools": [], "reasoning_effort": "high"}, {}),
    ],
)
def test_request_attributes(model: Any, kwargs: dict[str, Any], expected: dict[str, Any]) -> None:
    assert request_attributes(model, kwargs) == expected


# -- tool definitions ------------------------------------------------------------------------------

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather of a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


def test_tool_definitions() -> None:
    tools = [
        WEATHER,
        {"function": {"name": "ping"}},  # no type: "function"; no description/parameters
        {"type": "function"},  # no function: skipped
        {"type": "function", "function": "ping"},  # function not a mapping: skipped
        "not a schema",
    ]
    expected = [
        {
            "type": "function",
            "name": "get_weather",
            "description": "The weather of a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
        {"type": "function", "name": "ping"},
    ]
    for choice in (None, ToolChoice(), ToolChoice(mode="required"), ToolChoice(mode="ping")):
        result = tool_definitions(tools, choice)
        assert result is not None
        assert json.loads(result) == expected
    assert tool_definitions([WEATHER], None) == (
        '[{"type": "function", "name": "get_weather", "description": "The weather of a city.", '
        '"parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}]'
    )


@pytest.mark.parametrize(
    ("tools", "choice"),
    [
        (None, None),
        ([], ToolChoice()),
        ([WEATHER], ToolChoice(mode="none")),
        ([{"type": "function"}, "x"], None),  # nothing usable
    ],
)
def test_no_tool_definitions(tools: Any, choice: ToolChoice | None) -> None:
    assert tool_definitions(tools, choice) is None


# -- agent description -----------------------------------------------------------------------------


class NoDoc:
    pass


class BlankDoc:
    """ """


class OneLine:
    """Answers questions."""


class Paragraphs:
    """Looks things up
    on the web,   politely.

    Second paragraph, left out.
    """


@pytest.mark.parametrize(
    ("cls", "expected"),
    [
        (NoDoc, "No description available"),
        (BlankDoc, "No description available"),
        (OneLine, "Answers questions."),
        (Paragraphs, "Looks things up on the web, politely."),
        (Agent, "A ReAct agent whose every step can be intercepted by middleware."),
    ],
)
def test_agent_description(cls: type, expected: str) -> None:
    agent: Any = object.__new__(cls)  # the description reads the class only
    assert agent_description(agent) == expected
