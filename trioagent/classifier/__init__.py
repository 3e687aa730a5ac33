"""Classifier models: typed questions answered with probabilities.

Used by :class:`~trioagent.middleware.ModelRouterMiddleware` to pick a chat model per reply.
"""

from ._base import (
    ClassifierInput as ClassifierInput,
    ClassifierModelBase as ClassifierModelBase,
    ClassifierResponseError as ClassifierResponseError,
)
from ._openai import OpenAIClassifierModel as OpenAIClassifierModel
from ._types import (
    Answer as Answer,
    BinaryAnswer as BinaryAnswer,
    BinaryCriteria as BinaryCriteria,
    BinaryQuestion as BinaryQuestion,
    ChoiceAnswer as ChoiceAnswer,
    ChoiceQuestion as ChoiceQuestion,
    ClassifierResponse as ClassifierResponse,
    ClassifierUsage as ClassifierUsage,
    Question as Question,
    RefusalAnswer as RefusalAnswer,
    ScoreAnswer as ScoreAnswer,
    ScoreQuestion as ScoreQuestion,
)

__all__ = [
    "Answer",
    "BinaryAnswer",
    "BinaryCriteria",
    "BinaryQuestion",
    "ChoiceAnswer",
    "ChoiceQuestion",
    "ClassifierInput",
    "ClassifierModelBase",
    "ClassifierResponse",
    "ClassifierResponseError",
    "ClassifierUsage",
    "OpenAIClassifierModel",
    "Question",
    "RefusalAnswer",
    "ScoreAnswer",
    "ScoreQuestion",
]
