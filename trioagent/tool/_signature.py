"""A function's tool parameters: the input schema the model sees and the conversion of the
arguments it sends, both from one walk over the signature (see :mod:`._shape`).

A parameter's docstring text becomes its ``description`` (next to ``$ref`` for classes); a
default is recorded as ``default`` (when JSON-serializable) and makes the parameter optional.
``self``, ``cls``, ``_agent_state`` and ``emit`` are left out; ``*args`` / ``**kwargs`` are
refused (with an explicit ``input_schema`` they are left out: the schema says what a call
passes).  An annotation that cannot be resolved (a forward reference to an unknown name)
accepts any value, with a warning; the other parameters keep their types.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Mapping

import attrs

from .._core.json_types import JSONObject, JSONValue
from ._docstring import parse_docstring
from ._hints import callable_docstring, callable_name, resolve_hints
from ._schema import Definitions
from ._shape import ConversionError, Shape, UnsupportedAnnotation
from ._walker import Walker, property_schema

__all__ = ["EXCLUDED_PARAMETERS", "ToolParameters", "function_input_schema"]

logger = logging.getLogger("trioagent.tool")

#: Parameters that never appear in a tool's schema (injected by the toolkit).
EXCLUDED_PARAMETERS = frozenset({"self", "cls", "_agent_state", "emit"})


@attrs.frozen
class _Parameter:
    name: str
    shape: Shape
    description: str | None
    default: object
    required: bool


class ToolParameters:
    """The tool parameters of ``func``, read once.

    ``strict`` (the default, for a schema read from the signature): ``*args`` / ``**kwargs``
    and a parameter annotated with a class no JSON value can be (see
    :class:`~._shape.UnsupportedAnnotation`) raise a ``TypeError`` naming the function (and
    the parameter); otherwise (an explicit schema) variadics are left out and such a parameter
    accepts the JSON value as it is.
    """

    def __init__(self, func: Callable[..., object], *, strict: bool = True) -> None:
        self._func_name = callable_name(func)
        doc = parse_docstring(callable_docstring(func))
        hints, unresolved = resolve_hints(func)
        walker = Walker(strict=strict)
        self._parameters: list[_Parameter] = []
        self._positional_only: list[str] = []
        for name, param in inspect.signature(func).parameters.items():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                if strict:
                    stars = "*" if param.kind == param.VAR_POSITIONAL else "**"
                    raise TypeError(
                        f"{self._func_name} takes {stars}{name}, which a tool schema cannot "
                        "describe (the model would see no such argument and a call passing "
                        "one would fail): declare each argument as a named parameter, or "
                        "register the function with an explicit input_schema=..."
                    )
                continue  # an explicit schema says what reaches **kwargs
            if name in EXCLUDED_PARAMETERS:
                continue
            if param.kind == param.POSITIONAL_ONLY:
                self._positional_only.append(name)
            annotation = hints.get(name, param.annotation)
            if name in unresolved:
                logger.warning(
                    "cannot resolve the annotation %r of parameter %r of %s; "
                    "its schema accepts any value",
                    annotation,
                    name,
                    self._func_name,
                )
                annotation = object
            required = param.default is param.empty
            try:
                shape = walker.shape(annotation)
            except UnsupportedAnnotation as exc:
                raise TypeError(
                    f"parameter {name!r} of {self._func_name}: {exc}. A tool argument arrives "
                    "as JSON: annotate it with a JSON-compatible type (str, int, float, bool, "
                    "None, list, dict, Literal, an enum, datetime/date/time, UUID, Path, "
                    "Decimal, an attrs class, a dataclass, a TypedDict, a NamedTuple or a "
                    "pydantic model), or register the function with an explicit "
                    "input_schema=... (the argument is then passed as the JSON value it is)"
                ) from None
            self._parameters.append(
                _Parameter(name, shape, doc.params.get(name), param.default, required)
            )
        self._converted = [p for p in self._parameters if p.shape.needs_conversion]

    def schema(self) -> JSONObject:
        """The JSON schema of the parameters.

        Raises:
            ValueError: a positional-only parameter (tool arguments are passed by keyword).
        """
        if self._positional_only:
            raise ValueError(
                f"parameter {self._positional_only[0]!r} of {self._func_name} is "
                "positional-only; tool arguments are passed by keyword"
            )
        defs = Definitions()
        properties = {
            p.name: property_schema(p.shape, defs, p.description, p.default, p.required)
            for p in self._parameters
        }
        schema: JSONObject = {"type": "object", "properties": properties}
        required = [p.name for p in self._parameters if p.required]
        if required:
            schema["required"] = required
        if defs.defs:
            schema["$defs"] = defs.defs
        return schema

    def convert(self, arguments: Mapping[str, JSONValue]) -> dict[str, object]:
        """The arguments (JSON values) converted to the annotated types.

        Raises:
            ConversionError: every argument that does not fit, one line each, prefixed with
                ``argument '<name>': `` and ending with its JSON path.
        """
        converted = dict(arguments)
        errors: list[str] = []
        for parameter in self._converted:
            if parameter.name not in converted:
                continue
            try:
                converted[parameter.name] = parameter.shape.convert(
                    converted[parameter.name], f"$.{parameter.name}"
                )
            except ConversionError as exc:
                errors.extend(f"argument {parameter.name!r}: {line}" for line in exc.errors)
        if errors:
            raise ConversionError(errors)
        return converted


def function_input_schema(func: Callable[..., object]) -> JSONObject:
    """The JSON schema of ``func``'s tool parameters (see the module docstring).

    Raises:
        ValueError: a positional-only parameter (tool arguments are passed by keyword).
    """
    return ToolParameters(func).schema()
