"""``AskUser``: multiple-choice questions for the user, answered by the caller.

An external tool: the agent does not run it but parks the reply with a
``RequireExternalExecutionEvent`` (the same path as any external execution, next to the
confirmation path).  The caller shows the questions, and resumes the agent with an
``ExternalExecutionResultEvent`` whose result it can build with :meth:`AskUser.answer`; the
result's metadata is checked against :attr:`AskUser.metadata_schema` when it comes back.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from ..._core.json_types import JSONObject
from ...message import ToolResultBlock, ToolResultState
from ...permission import PermissionBehavior, PermissionContext, PermissionDecision
from .._base import ToolBase

__all__ = ["AskUser", "AskUserAnswer"]

HEADER_MAX_CHARS = 12

_OPTION: JSONObject = {
    "type": "object",
    "properties": {
        "label": {
            "type": "string",
            "description": "The display text for this option that the user will see and "
            "select. Should be concise (1-5 words) and clearly describe the choice.",
        },
        "description": {
            "type": "string",
            "description": "Explanation of what this option means or what will happen if "
            "chosen. Useful for providing context about trade-offs or implications.",
        },
        "preview": {
            "anyOf": [{"type": "string"}, {"type": "null"}],
            "default": None,
            "description": "Optional preview content rendered when this option is focused. "
            "Use for mockups, code snippets, or visual comparisons that help users compare "
            "options. Only supported in single-select questions.",
        },
    },
    "required": ["label", "description"],
}

_QUESTION: JSONObject = {
    "type": "object",
    "properties": {
        "question": {
            "type": "string",
            "description": "The complete question to ask the user. Should be clear, specific, "
            'and end with a question mark. Example: "Which library should we use for date '
            'formatting?" If multi_select is true, phrase it accordingly, e.g. "Which '
            'features do you want to enable?"',
        },
        "header": {
            "type": "string",
            "maxLength": HEADER_MAX_CHARS,
            "description": "Very short label displayed as a chip/tag (max "
            f'{HEADER_MAX_CHARS} chars). Examples: "Auth method", "Library", "Approach".',
        },
        "context": {
            "anyOf": [{"type": "string"}, {"type": "null"}],
            "default": None,
            "description": "What the user should look at while answering — the draft being "
            "reviewed, the two designs being compared, the error that prompted the question. "
            "Shown above the options.",
        },
        "options": {
            "type": "array",
            "items": _OPTION,
            "minItems": 2,
            "maxItems": 4,
            "description": "The available choices for this question. Must have 2-4 options. "
            "Each option should be a distinct, mutually exclusive choice (unless multi_select "
            "is enabled). There should be no 'Other' option — that will be provided "
            "automatically.",
        },
        "multi_select": {
            "type": "boolean",
            "default": False,
            "description": "Set to true to allow the user to select multiple options instead "
            "of just one. Use when choices are not mutually exclusive. Note: preview is only "
            "supported when multi_select is false.",
        },
    },
    "required": ["question", "header", "options"],
}


@attrs.define(kw_only=True)
class AskUserAnswer:
    """One question's answer: the question verbatim, the chosen labels, or free text."""

    question: str
    selected: list[str] = attrs.field(factory=list)
    other: str | None = None


class AskUser(ToolBase):
    """Asks the user 1-4 multiple-choice questions (see the module docstring).

    Read-only, concurrency-safe, always allowed (a confirmation in front of a question would
    only be a question about a question).
    """

    name = "AskUser"
    description = """Asks the user multiple-choice questions to gather information, clarify ambiguity, understand preferences, make decisions, or offer choices.

Use this tool when you need to ask the user questions during execution:
1. Gather user preferences or requirements.
2. Clarify ambiguous instructions before proceeding.
3. Get decisions on implementation choices as you work.
4. Offer the user a set of directions to take.

## Usage rules
- You may batch 1–4 questions in a single call; batch related questions together.
- Each question must have 2–4 options. Option labels must be unique within a question.
- Question texts must be unique across the batch.
- Users will always be able to select "Other" to provide free-text input — do not add an "Other" option yourself.
- Use `multi_select: true` only when the choices are genuinely not mutually exclusive.
- If you recommend a specific option, place it first and append "(Recommended)" to its label.
- The `preview` field on an option renders a side-by-side visual comparison; only use it for concrete artifacts (code snippets, ASCII mockups, config examples) where seeing the content helps the user choose. Preview is only supported for single-select questions.
- Put whatever the user must look at to answer — a draft, a diff, an error — in `context` rather than in the question text.

## What comes back
`output` is written for you to read. The caller also returns the same answers in the result's metadata, as a list of answers, for programs that must branch on the choice rather than read prose."""
    input_schema: JSONObject = {  # noqa: RUF012
        "type": "object",
        "properties": {
            "questions": {
                "type": "array",
                "items": _QUESTION,
                "minItems": 1,
                "maxItems": 4,
                "description": "Questions to ask the user (1-4 questions). Question texts must "
                "be unique; option labels must be unique within each question.",
            }
        },
        "required": ["questions"],
    }
    metadata_schema: JSONObject | None = {  # noqa: RUF012
        "type": "object",
        "properties": {
            "answers": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "question": {"type": "string"},
                        "selected": {"type": "array", "items": {"type": "string"}},
                        "other": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                    },
                    "required": ["question"],
                },
            }
        },
        "required": ["answers"],
    }
    is_read_only = True
    is_concurrency_safe = True
    is_external_tool = True

    async def check_permissions(
        self, tool_input: JSONObject, context: PermissionContext
    ) -> PermissionDecision:
        """Always allowed."""
        return PermissionDecision(
            behavior=PermissionBehavior.ALLOW, message="The AskUser tool is always permitted."
        )

    @staticmethod
    def answer(
        tool_call_id: str, answers: Sequence[AskUserAnswer], name: str = "AskUser"
    ) -> ToolResultBlock:
        """The result to resume the agent with: a readable summary as output, the answers
        as metadata (``{"answers": [{"question", "selected", "other"}, ...]}``)."""
        lines = []
        for item in answers:
            chosen = ", ".join(item.selected)
            if item.other:
                chosen = f"{chosen}; {item.other}" if chosen else item.other
            lines.append(f'"{item.question}" = "{chosen or "(no answer)"}"')
        return ToolResultBlock(
            id=tool_call_id,
            name=name,
            output="User has answered your questions: " + " ".join(lines),
            state=ToolResultState.SUCCESS,
            metadata={
                "answers": [
                    {"question": a.question, "selected": list(a.selected), "other": a.other}
                    for a in answers
                ]
            },
        )
