"""Questions, answers and the response of a classifier model.

A classifier answers typed questions about a *state* (a text, a JSON object, or text and
image blocks) and gives the probability of each answer:

* :class:`BinaryQuestion` — true or false → :class:`BinaryAnswer` (the probability of true);
* :class:`ChoiceQuestion` — one of several named values → :class:`ChoiceAnswer`;
* :class:`ScoreQuestion` — a level on an ordered scale → :class:`ScoreAnswer`.

A provider may decline to answer: :class:`RefusalAnswer`.  Every class is an attrs class with
its wire tag in the class variable ``type``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, ClassVar, TypeAlias

import attrs

from .._core.ids import generate_id, generate_timestamp
from .._core.json_types import JSONObject

__all__ = [
    "Answer",
    "BinaryAnswer",
    "BinaryCriteria",
    "BinaryQuestion",
    "ChoiceAnswer",
    "ChoiceQuestion",
    "ClassifierResponse",
    "ClassifierUsage",
    "Question",
    "RefusalAnswer",
    "ScoreAnswer",
    "ScoreQuestion",
]


def _non_empty_criteria(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not value:
        raise ValueError(f"{type(instance).__name__}.{attribute.name} needs at least one entry")


def _criteria_dict(value: Mapping[str, str | None]) -> dict[str, str | None]:
    return dict(value)


def _criteria_list(value: Iterable[str]) -> list[str]:
    return list(value)


def _probability(instance: Any, attribute: attrs.Attribute[float], value: float) -> None:
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{type(instance).__name__}.{attribute.name} must be in [0, 1]: {value}")


@attrs.frozen(kw_only=True)
class BinaryCriteria:
    """What makes the answer true, and what makes it false (both optional)."""

    true: str | None = None
    false: str | None = None


@attrs.frozen(kw_only=True)
class BinaryQuestion:
    """A yes/no question; the answer is the probability of *true*."""

    type: ClassVar[str] = "binary"
    instructions: str | None = None
    criteria: BinaryCriteria | None = None


@attrs.frozen(kw_only=True)
class ChoiceQuestion:
    """Pick one of ``criteria``'s keys; each value describes when to pick it (or ``None``)."""

    type: ClassVar[str] = "choice"
    criteria: dict[str, str | None] = attrs.field(
        converter=_criteria_dict, validator=_non_empty_criteria
    )
    instructions: str | None = None


@attrs.frozen(kw_only=True)
class ScoreQuestion:
    """Rate on an ordered scale: ``criteria[i]`` is the label of level ``i``."""

    type: ClassVar[str] = "score"
    criteria: list[str] = attrs.field(converter=_criteria_list, validator=_non_empty_criteria)
    instructions: str | None = None


Question: TypeAlias = BinaryQuestion | ChoiceQuestion | ScoreQuestion


@attrs.frozen(kw_only=True)
class BinaryAnswer:
    """The probability that the answer is true."""

    type: ClassVar[str] = "binary_answer"
    probability: float = attrs.field(validator=_probability)


@attrs.frozen(kw_only=True)
class ChoiceAnswer:
    """The chosen value, the classifier's confidence, and each value's probability."""

    type: ClassVar[str] = "choice_answer"
    choice: str
    confidence: float = attrs.field(validator=_probability)
    probabilities: dict[str, float] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class ScoreAnswer:
    """The expected level, the confidence, the level labels and each level's probability."""

    type: ClassVar[str] = "score_answer"
    score: float
    confidence: float = attrs.field(validator=_probability)
    legend: dict[int, str] = attrs.field(factory=dict)
    probabilities: dict[int, float] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class RefusalAnswer:
    """The classifier declined to answer."""

    type: ClassVar[str] = "refusal_answer"


Answer: TypeAlias = BinaryAnswer | ChoiceAnswer | ScoreAnswer | RefusalAnswer


@attrs.frozen(kw_only=True)
class ClassifierUsage:
    """Seconds the call took and, when the provider reports them, its token counts."""

    type: ClassVar[str] = "classifier"
    time: float
    input_tokens: int | None = None
    output_tokens: int | None = None


@attrs.frozen(kw_only=True)
class ClassifierResponse:
    """The answers of one classifier call, keyed by question name."""

    type: ClassVar[str] = "classifier_response"
    model: str
    content: dict[str, Answer]
    usage: ClassifierUsage | None = None
    id: str = attrs.field(factory=generate_id)
    created_at: str = attrs.field(factory=generate_timestamp)
    metadata: JSONObject = attrs.field(factory=dict)
