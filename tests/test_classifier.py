"""Classifier models (trioagent/classifier): question/answer types, the OpenAI Decisions
request and response format over the real loopback server, and the typed error on a bad
response."""

from __future__ import annotations

import json
from functools import partial
from typing import Any

import pytest
import trio

from trioagent.classifier import (
    BinaryAnswer,
    BinaryCriteria,
    BinaryQuestion,
    ChoiceAnswer,
    ChoiceQuestion,
    ClassifierModelBase,
    ClassifierResponseError,
    OpenAIClassifierModel,
    RefusalAnswer,
    ScoreAnswer,
    ScoreQuestion,
)
from trioagent.classifier._openai import format_input, format_question, parse_response
from trioagent.exception import ModelAuthenticationError, ModelTimeoutError
from trioagent.message import Base64Source, DataBlock, TextBlock
from trioagent.testing import (
    OpenAICompatibleServer,
    RecordedRequest,
    ScriptedResponse,
    serve_openai_compatible,
)

KEY = "sk-classifier-0123456789"
ROUTE = "/v1/decisions"
ROUTING = {"route": ChoiceQuestion(criteria={"fast": "small talk", "strong": "math and code"})}


@pytest.fixture
async def server(nursery: trio.Nursery) -> OpenAICompatibleServer:
    server: OpenAICompatibleServer = await nursery.start(
        partial(serve_openai_compatible, [], api_key=KEY)
    )
    return server


def answering(server: OpenAICompatibleServer, *payloads: Any) -> list[RecordedRequest]:
    """Serve ``payloads`` (JSON objects, or raw ScriptedResponses) in order; return the log."""
    seen: list[RecordedRequest] = []
    queue = list(payloads)

    def handler(request: RecordedRequest) -> ScriptedResponse:
        seen.append(request)
        item = queue.pop(0)
        return item if isinstance(item, ScriptedResponse) else ScriptedResponse.json(item)

    server.add_route("POST", ROUTE, handler)
    return seen


def classifier(server: OpenAICompatibleServer, **kwargs: Any) -> OpenAIClassifierModel:
    return OpenAIClassifierModel(credential=server.credential(), **kwargs)


# -- types -----------------------------------------------------------------------------------


def test_questions_need_criteria() -> None:
    with pytest.raises(ValueError, match="at least one"):
        ChoiceQuestion(criteria={})
    with pytest.raises(ValueError, match="at least one"):
        ScoreQuestion(criteria=[])
    assert ChoiceQuestion(criteria={"a": None}).criteria == {"a": None}


def test_answer_probabilities_are_checked() -> None:
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        BinaryAnswer(probability=1.5)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        ChoiceAnswer(choice="a", confidence=-0.1)


async def test_base_class_is_abstract() -> None:
    with pytest.raises(NotImplementedError):
        await ClassifierModelBase("m")("x", ROUTING)


# -- request format ----------------------------------------------------------------------------


def test_question_formats_follow_the_decisions_api() -> None:
    binary = BinaryQuestion(criteria=BinaryCriteria(true="it is a question", false="a statement"))
    assert format_question("is_q", binary) == {
        "type": "predicate",
        "name": "is_q",
        "instructions": "is_q\nTrue: it is a question\nFalse: a statement",
    }
    choice = ChoiceQuestion(criteria={"fast": "small talk", "other": None}, instructions="Pick")
    assert format_question("route", choice) == {
        "type": "choice",
        "name": "route",
        "instructions": "Pick",
        "choices": [{"value": "fast", "description": "small talk"}, {"value": "other"}],
    }
    score = ScoreQuestion(criteria=["low", "high"], instructions="How hard?")
    assert format_question("level", score) == {
        "type": "score",
        "name": "level",
        "instructions": "How hard?",
        "levels": [{"label": "low"}, {"label": "high"}],
    }


def test_input_formats() -> None:
    assert format_input("plain") == "plain"
    assert format_input({"q": "héllo"}) == '{"q": "héllo"}'
    image = DataBlock(source=Base64Source(data="QUJD", media_type="image/png"))
    assert format_input([TextBlock(text="look"), image]) == [
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "look"},
                {"type": "input_image", "image_url": "data:image/png;base64,QUJD"},
            ],
        }
    ]
    audio = DataBlock(source=Base64Source(data="QUJD", media_type="audio/wav"))
    with pytest.raises(ValueError, match="base64 image"):
        format_input([audio])


# -- the call over HTTP ------------------------------------------------------------------------


async def test_choice_call_sends_the_request_and_parses_the_answer(
    server: OpenAICompatibleServer,
) -> None:
    seen = answering(
        server,
        {
            "id": "dec_1",
            "model": "gpt-6-luna",
            "answers": [
                {
                    "type": "choice",
                    "name": "route",
                    "choice": "strong",
                    "confidence": 0.8,
                    "probabilities": [
                        {"value": "fast", "probability": 0.2},
                        {"value": "strong", "probability": 0.8},
                    ],
                }
            ],
            "usage": {"input_tokens": 12, "output_tokens": 1},
        },
    )
    async with classifier(server, parameters={"seed": 7}) as clf:
        response = await clf("Prove Fermat's little theorem", ROUTING)
    (request,) = seen
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.body == {
        "model": "gpt-6-luna",
        "input": "Prove Fermat's little theorem",
        "questions": [
            {
                "type": "choice",
                "name": "route",
                "instructions": "route",
                "choices": [
                    {"value": "fast", "description": "small talk"},
                    {"value": "strong", "description": "math and code"},
                ],
            }
        ],
        "seed": 7,
    }
    assert response.content == {
        "route": ChoiceAnswer(
            choice="strong", confidence=0.8, probabilities={"fast": 0.2, "strong": 0.8}
        )
    }
    assert response.id == "dec_1"
    assert response.usage is not None
    assert (response.usage.input_tokens, response.usage.output_tokens) == (12, 1)
    assert response.usage.time >= 0


async def test_every_answer_type_is_parsed(server: OpenAICompatibleServer) -> None:
    answering(
        server,
        {
            "answers": [
                {"type": "predicate", "name": "is_q", "probability": 0.9},
                {
                    "type": "score",
                    "name": "level",
                    "score": 1.6,
                    "confidence": 0.6,
                    "probabilities": [
                        {"value": 0, "label": "easy", "probability": 0.1},
                        {"value": 1, "label": "medium", "probability": 0.2},
                        {"value": 2, "label": "hard", "probability": 0.7},
                    ],
                },
                {"type": "refusal", "name": "route"},
            ]
        },
    )
    questions = {
        "is_q": BinaryQuestion(),
        "level": ScoreQuestion(criteria=["easy", "medium", "hard"]),
        **ROUTING,
    }
    async with classifier(server) as clf:
        response = await clf({"text": "why?"}, questions)
    assert response.content["is_q"] == BinaryAnswer(probability=0.9)
    assert response.content["level"] == ScoreAnswer(
        score=1.6,
        confidence=0.6,
        legend={0: "easy", 1: "medium", 2: "hard"},
        probabilities={0: 0.1, 1: 0.2, 2: 0.7},
    )
    assert response.content["route"] == RefusalAnswer()
    assert response.model == "gpt-6-luna"


@pytest.mark.parametrize(
    ("probabilities", "expected"),
    [
        (
            [{"value": "fast", "probability": 0.3}, {"value": "strong", "probability": 0.7}],
            "strong",
        ),
        ([{"value": "strong", "probability": 0.5}, {"value": "fast", "probability": 0.5}], "fast"),
    ],
)
def test_without_a_choice_the_most_probable_value_is_picked(
    probabilities: list[dict[str, Any]], expected: str
) -> None:
    payload = {"answers": [{"type": "choice", "name": "route", "probabilities": probabilities}]}
    response = parse_response(payload, ROUTING, model="m", elapsed=0.0)
    answer = response.content["route"]
    assert isinstance(answer, ChoiceAnswer)
    assert answer.choice == expected  # a tie goes to the value offered first
    assert answer.confidence == max(p["probability"] for p in probabilities)


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ([], "not an object"),
        ({"result": "strong"}, "no 'answers' list"),
        ({"answers": [{"type": "choice", "choice": "fast"}]}, "without a name"),
        ({"answers": [{"type": "choice", "name": "other", "choice": "fast"}]}, "unknown question"),
        ({"answers": []}, "unanswered"),
        ({"answers": [{"type": "verdict", "name": "route"}]}, "unknown type"),
        (
            {"answers": [{"type": "predicate", "name": "route", "probability": 0.5}]},
            "'choice' question",
        ),
        ({"answers": [{"type": "choice", "name": "route", "choice": "turbo"}]}, "not offered"),
        ({"answers": [{"type": "choice", "name": "route"}]}, "neither a choice"),
        (
            {
                "answers": [
                    {"type": "choice", "name": "route", "choice": "fast", "confidence": "hi"}
                ]
            },
            "not a number",
        ),
    ],
)
async def test_bad_responses_raise_a_typed_error(
    server: OpenAICompatibleServer, payload: Any, message: str
) -> None:
    answering(server, payload)
    async with classifier(server) as clf:
        with pytest.raises(ClassifierResponseError, match=message) as info:
            await clf("hi", ROUTING)
    assert info.value.error_type == "upstream"


async def test_a_non_json_body_is_a_typed_error(server: OpenAICompatibleServer) -> None:
    answering(server, ScriptedResponse(body=b"<html>oops</html>", media_type="text/html"))
    async with classifier(server) as clf:
        with pytest.raises(ClassifierResponseError, match="not JSON"):
            await clf("hi", ROUTING)


async def test_http_errors_are_typed_and_the_key_is_not_leaked(
    server: OpenAICompatibleServer,
) -> None:
    answering(server, {"answers": []})
    bad = OpenAIClassifierModel(
        credential=server.credential().__class__(
            api_key="sk-wrong-key-42", base_url=server.base_url
        )
    )
    async with bad:
        with pytest.raises(ModelAuthenticationError) as info:
            await bad("hi", ROUTING)
    assert info.value.status_code == 401
    assert "sk-wrong-key-42" not in str(info.value)


async def test_no_questions_is_a_value_error(server: OpenAICompatibleServer) -> None:
    async with classifier(server) as clf:
        with pytest.raises(ValueError, match="at least one question"):
            await clf("hi", {})


async def test_a_stalled_classifier_times_out_and_closes_its_connection(
    server: OpenAICompatibleServer, autojump_clock: trio.testing.MockClock
) -> None:
    answering(server, ScriptedResponse(body=[b"{"], stall_after=0))
    async with classifier(server, timeout=5.0) as clf:
        with pytest.raises(ModelTimeoutError, match="deadline"):
            await clf("hi", ROUTING)
    await server.wait_all_closed()
    assert server.connections[0].closed_by_client


def test_call_keyword_arguments_join_the_body() -> None:
    model = OpenAIClassifierModel(credential=None)
    body = model.build_body("x", ROUTING, store=False)
    assert json.loads(json.dumps(body))["store"] is False
