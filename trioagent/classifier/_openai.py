"""OpenAI's Decisions API over httpx2.

``POST {base_url}/decisions`` with a Bearer key and the body
``{"model", "input", "questions": [...], **parameters}``.  Questions map to
``predicate`` (binary), ``choice`` and ``score`` questions; the response's ``answers`` are
keyed by ``name``.

Which label is picked: the provider's own ``choice`` (AgentScope does no calibration).  An
answer that carries only ``probabilities`` gets the most probable value (the first offered
one on a tie), with that probability as its confidence.  Anything else that does not fit the
questions asked — a question left unanswered, a value that was not offered, an unknown answer
type — raises :class:`~trioagent.classifier.ClassifierResponseError`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import ClassVar

import httpx2
import trio

from .._core.ids import generate_id
from .._core.json_types import JSONObject, JSONValue
from .._http import bearer_headers, send_request
from ..credential import OpenAICredential
from ..exception import ModelTimeoutError
from ..message import Base64Source, DataBlock, TextBlock
from ._base import ClassifierInput, ClassifierModelBase, ClassifierResponseError
from ._types import (
    Answer,
    BinaryAnswer,
    BinaryQuestion,
    ChoiceAnswer,
    ChoiceQuestion,
    ClassifierResponse,
    ClassifierUsage,
    Question,
    RefusalAnswer,
    ScoreAnswer,
    ScoreQuestion,
)

__all__ = ["OpenAIClassifierModel"]


class OpenAIClassifierModel(ClassifierModelBase):
    """A classifier backed by OpenAI's Decisions endpoint (or a compatible server).

    Args:
        model: the model name (default ``"gpt-6-luna"``, as AgentScope).
        credential: key and base URL (default ``OpenAICredential()``, which reads
            ``OPENAI_API_KEY`` / ``OPENAI_BASE_URL``).
        Other keyword arguments: see :class:`~trioagent.classifier.ClassifierModelBase`.
    """

    type: ClassVar[str] = "openai_classifier"
    credential: OpenAICredential

    def __init__(
        self,
        model: str = "gpt-6-luna",
        *,
        credential: OpenAICredential | None = None,
        parameters: Mapping[str, JSONValue] | None = None,
        http_client: httpx2.AsyncClient | None = None,
        timeout: float | None = 30.0,
        read_timeout: float | None = 30.0,
        connect_timeout: float | None = 10.0,
    ) -> None:
        super().__init__(
            model,
            credential=credential or OpenAICredential(),
            parameters=parameters,
            http_client=http_client,
            timeout=timeout,
            read_timeout=read_timeout,
            connect_timeout=connect_timeout,
        )

    def build_body(
        self, state: ClassifierInput, questions: Mapping[str, Question], **kwargs: JSONValue
    ) -> JSONObject:
        """The request body for ``state`` and ``questions`` (public for inspection)."""
        if not questions:
            raise ValueError("a classifier call needs at least one question")
        return {
            "model": self.model,
            "input": format_input(state),
            "questions": [format_question(name, q) for name, q in questions.items()],
            **self.parameters,
            **kwargs,
        }

    async def __call__(
        self, state: ClassifierInput, questions: Mapping[str, Question], **kwargs: JSONValue
    ) -> ClassifierResponse:
        body = self.build_body(state, questions, **kwargs)
        headers = bearer_headers(
            self.credential.get_api_key(), organization=self.credential.get_organization()
        )
        url = f"{self.credential.get_base_url()}/decisions"
        request = self.http_client.build_request("POST", url, json=body, headers=headers)
        start = trio.current_time()
        with trio.move_on_after(
            self.timeout if self.timeout is not None else float("inf")
        ) as scope:
            response = await send_request(
                self.http_client, request, stream=False, redact=self._redact
            )
        if scope.cancelled_caught:
            raise ModelTimeoutError(
                f"the classifier call to {self.model!r} passed its {self.timeout}s deadline"
            )
        elapsed = trio.current_time() - start
        try:
            payload = response.json()
        except ValueError as exc:
            raise ClassifierResponseError(
                self._redact(f"the classifier response is not JSON: {response.text[:200]!r}"),
                status_code=response.status_code,
            ) from exc
        return parse_response(payload, questions, model=self.model, elapsed=elapsed)


# -- request ---------------------------------------------------------------------------------


def format_input(state: ClassifierInput) -> JSONValue:
    """A str as is; a mapping as JSON text; blocks as one user message of input parts."""
    if isinstance(state, str):
        return state
    if isinstance(state, Mapping):
        return json.dumps(dict(state), ensure_ascii=False)
    parts: list[JSONObject] = []
    for block in state:
        if isinstance(block, TextBlock):
            parts.append({"type": "input_text", "text": block.text})
        elif (
            isinstance(block, DataBlock)
            and isinstance(block.source, Base64Source)
            and block.source.media_type.startswith("image/")
        ):
            source = block.source
            parts.append(
                {
                    "type": "input_image",
                    "image_url": f"data:{source.media_type};base64,{source.data}",
                }
            )
        else:
            raise ValueError(
                "a classifier input may hold only text blocks and base64 image blocks, "
                f"got {block!r:.120}"
            )
    return [{"role": "user", "content": parts}]


def format_question(name: str, question: Question) -> JSONObject:
    """One question of the request (its instructions default to its name)."""
    instructions = question.instructions or name
    if isinstance(question, BinaryQuestion):
        criteria = question.criteria
        if criteria is not None and criteria.true:
            instructions += f"\nTrue: {criteria.true}"
        if criteria is not None and criteria.false:
            instructions += f"\nFalse: {criteria.false}"
        return {"type": "predicate", "name": name, "instructions": instructions}
    if isinstance(question, ChoiceQuestion):
        choices: list[JSONObject] = []
        for value, description in question.criteria.items():
            choice: JSONObject = {"value": value}
            if description is not None:
                choice["description"] = description
            choices.append(choice)
        return {"type": "choice", "name": name, "instructions": instructions, "choices": choices}
    if isinstance(question, ScoreQuestion):
        levels = [{"label": label} for label in question.criteria]
        return {"type": "score", "name": name, "instructions": instructions, "levels": levels}
    raise TypeError(f"not a classifier question: {question!r}")


# -- response --------------------------------------------------------------------------------

_ANSWER_TYPES = {"predicate": BinaryQuestion, "choice": ChoiceQuestion, "score": ScoreQuestion}


def parse_response(
    payload: JSONValue, questions: Mapping[str, Question], *, model: str, elapsed: float
) -> ClassifierResponse:
    """Turn the Decisions response into a :class:`ClassifierResponse`.

    Raises:
        ClassifierResponseError: the payload does not answer ``questions``.
    """
    if not isinstance(payload, dict):
        raise ClassifierResponseError(f"the classifier response is not an object: {payload!r:.200}")
    raw_answers = payload.get("answers")
    if not isinstance(raw_answers, list):
        raise ClassifierResponseError(
            f"the classifier response has no 'answers' list: {payload!r:.200}"
        )
    content: dict[str, Answer] = {}
    for raw in raw_answers:
        if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
            raise ClassifierResponseError(f"a classifier answer without a name: {raw!r:.200}")
        name = raw["name"]
        question = questions.get(name)
        if question is None:
            raise ClassifierResponseError(f"the classifier answered an unknown question {name!r}")
        content[name] = _parse_answer(raw, name, question)
    missing = [name for name in questions if name not in content]
    if missing:
        raise ClassifierResponseError(f"the classifier left question(s) unanswered: {missing}")
    raw_usage = payload.get("usage")
    usage: JSONObject = raw_usage if isinstance(raw_usage, dict) else {}
    return ClassifierResponse(
        model=str(payload.get("model") or model),
        content=content,
        usage=ClassifierUsage(
            time=elapsed,
            input_tokens=_optional_int(usage.get("input_tokens")),
            output_tokens=_optional_int(usage.get("output_tokens")),
        ),
        id=str(payload.get("id") or "") or generate_id(),
        metadata={"usage": usage} if usage else {},
    )


def _optional_int(value: JSONValue) -> int | None:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _number(raw: JSONObject, key: str, name: str) -> float:
    value = raw.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ClassifierResponseError(f"answer {name!r}: {key!r} is not a number: {value!r:.80}")
    return float(value)


def _unit(value: float, key: str, name: str) -> float:
    if not 0.0 <= value <= 1.0:
        raise ClassifierResponseError(f"answer {name!r}: {key!r} is not in [0, 1]: {value}")
    return value


def _parse_answer(raw: JSONObject, name: str, question: Question) -> Answer:
    kind = raw.get("type")
    if kind == "refusal":
        return RefusalAnswer()
    expected = _ANSWER_TYPES.get(kind) if isinstance(kind, str) else None
    if expected is None:
        raise ClassifierResponseError(f"answer {name!r} has an unknown type {kind!r}")
    if not isinstance(question, expected):
        raise ClassifierResponseError(
            f"answer {name!r} is a {kind!r} answer to a {question.type!r} question"
        )
    if isinstance(question, BinaryQuestion):
        return BinaryAnswer(
            probability=_unit(_number(raw, "probability", name), "probability", name)
        )
    if isinstance(question, ChoiceQuestion):
        return _parse_choice(raw, name, question)
    assert isinstance(question, ScoreQuestion)
    return _parse_score(raw, name, question)


def _probability_list(raw: JSONObject, name: str) -> Sequence[JSONObject]:
    items = raw.get("probabilities") or []
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        raise ClassifierResponseError(f"answer {name!r}: 'probabilities' is not a list of objects")
    return items


def _parse_choice(raw: JSONObject, name: str, question: ChoiceQuestion) -> ChoiceAnswer:
    offered = list(question.criteria)
    probabilities: dict[str, float] = {}
    for item in _probability_list(raw, name):
        value = item.get("value")
        if value not in question.criteria:
            raise ClassifierResponseError(
                f"answer {name!r}: probability for {value!r}, which was not offered ({offered})"
            )
        probabilities[str(value)] = _unit(_number(item, "probability", name), "probability", name)
    choice = raw.get("choice")
    if choice is None:
        if not probabilities:
            raise ClassifierResponseError(f"answer {name!r} has neither a choice nor probabilities")
        # The most probable value; on a tie the one offered first.
        choice = max(offered, key=lambda v: probabilities.get(v, -1.0))
    if not isinstance(choice, str) or choice not in question.criteria:
        raise ClassifierResponseError(
            f"answer {name!r} chose {choice!r}, which was not offered ({offered})"
        )
    if raw.get("confidence") is not None:
        confidence = _unit(_number(raw, "confidence", name), "confidence", name)
    else:
        confidence = probabilities.get(choice, 0.0)
    return ChoiceAnswer(choice=choice, confidence=confidence, probabilities=probabilities)


def _parse_score(raw: JSONObject, name: str, question: ScoreQuestion) -> ScoreAnswer:
    legend: dict[int, str] = dict(enumerate(question.criteria))
    probabilities: dict[int, float] = {}
    for item in _probability_list(raw, name):
        level = item.get("value")
        if isinstance(level, bool) or not isinstance(level, int):
            raise ClassifierResponseError(f"answer {name!r}: level {level!r} is not an integer")
        if not 0 <= level < len(question.criteria):
            raise ClassifierResponseError(f"answer {name!r}: level {level} is out of range")
        legend[level] = str(item.get("label") or question.criteria[level])
        probabilities[level] = _unit(_number(item, "probability", name), "probability", name)
    if raw.get("score") is not None:
        score = _number(raw, "score", name)
    elif probabilities:
        score = sum(level * p for level, p in probabilities.items())
    else:
        raise ClassifierResponseError(f"answer {name!r} has neither a score nor probabilities")
    if raw.get("confidence") is not None:
        confidence = _unit(_number(raw, "confidence", name), "confidence", name)
    else:
        confidence = max(probabilities.values(), default=0.0)
    return ScoreAnswer(
        score=score, confidence=confidence, legend=legend, probabilities=probabilities
    )
