"""Signature → JSON schema, in the shapes pydantic produces (tools_middleware.md §3.2).

No pydantic at runtime: the shapes are reproduced directly, titles already stripped.

==========================  ===============================================================
annotation                  schema
==========================  ===============================================================
``str int float bool``      ``{"type": "string" | "integer" | "number" | "boolean"}``
``None``                    ``{"type": "null"}``
``bytes``                   ``{"type": "string", "format": "binary"}``
``Any`` / none              ``{}``
``Literal[a, b]``           ``{"enum": [a, b], "type": ...}`` (``const`` for one value; no
                            ``type`` when the values' types differ)
``Enum`` subclass           ``{"$ref": "#/$defs/Name"}``;
                            ``$defs.Name = {"enum": [...], "type": ...}``
``list[X]`` / ``Sequence``  ``{"items": X, "type": "array"}`` (``uniqueItems`` for sets;
                            ``prefixItems`` for fixed tuples)
``dict[str, X]`` / dict     ``{"additionalProperties": X | true, "type": "object"}``
``X | None`` / ``Union``    ``{"anyOf": [X, ..., {"type": "null"}]}``
``Annotated[X, "text"]``    X with ``description`` (also any metadata with a ``description``
                            attribute, e.g. pydantic ``Field``, and ``ge/gt/le/lt/min_length/
                            max_length`` constraints)
attrs / dataclass class     ``{"$ref": "#/$defs/Name"}``; ``$defs.Name`` an object schema built
                            from its fields (class docstring → ``description``)
pydantic model              its own ``model_json_schema()``, titles removed, under ``$defs``
==========================  ===============================================================

A parameter's docstring text becomes its ``description`` (next to ``$ref`` for classes); a
default is recorded as ``default`` (when JSON-serializable) and makes the parameter optional.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import enum
import functools
import inspect
import json
import types
import typing
from collections.abc import Callable
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import attrs

from ._docstring import parse_docstring

__all__ = [
    "EXCLUDED_PARAMETERS",
    "callable_docstring",
    "callable_name",
    "function_input_schema",
    "needs_structuring",
    "remove_title_field",
    "resolve_type_hints",
]

#: Parameters that never appear in a tool's schema (injected by the toolkit).
EXCLUDED_PARAMETERS = frozenset({"self", "cls", "_agent_state", "emit"})

_SCALARS: dict[Any, dict[str, Any]] = {
    str: {"type": "string"},
    int: {"type": "integer"},
    float: {"type": "number"},
    bool: {"type": "boolean"},
    bytes: {"type": "string", "format": "binary"},
    type(None): {"type": "null"},
    None: {"type": "null"},
}
_ARRAY_ORIGINS = {
    list,
    collections.abc.Sequence,
    collections.abc.MutableSequence,
    collections.abc.Iterable,
    collections.abc.Collection,
}
_SET_ORIGINS = {set, frozenset, collections.abc.Set, collections.abc.MutableSet}
_MAPPING_ORIGINS = {dict, collections.abc.Mapping, collections.abc.MutableMapping}
_CONSTRAINTS = {
    "ge": "minimum",
    "gt": "exclusiveMinimum",
    "le": "maximum",
    "lt": "exclusiveMaximum",
    "multiple_of": "multipleOf",
}


def remove_title_field(schema: dict[str, Any]) -> dict[str, Any]:
    """Drop ``title`` (noise for a model) at the top level and, recursively, in ``properties``
    values, ``items``, dict-valued ``additionalProperties`` and every dict under ``$defs``."""
    schema.pop("title", None)
    for prop in (schema.get("properties") or {}).values():
        if isinstance(prop, dict):
            remove_title_field(prop)
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            remove_title_field(schema[key])
    defs = schema.get("$defs")
    if isinstance(defs, dict):
        for sub in defs.values():
            if isinstance(sub, dict):
                remove_title_field(sub)
    return schema


def callable_name(func: Callable[..., Any]) -> str:
    """The name of a function, unwrapping ``functools.partial`` (an explicit ``__name__`` wins)."""
    while isinstance(func, functools.partial):
        explicit = vars(func).get("__name__")
        if explicit is not None:
            return str(explicit)
        func = func.func
    name = getattr(func, "__name__", None)
    return str(name) if name else type(func).__name__


def callable_docstring(func: Callable[..., Any]) -> str:
    """The docstring of a function, unwrapping partials (an explicit ``__doc__`` wins)."""
    while isinstance(func, functools.partial):
        if "__doc__" in vars(func):
            return func.__doc__ or ""
        func = func.func
    return inspect.getdoc(func) or ""


def resolve_type_hints(func: Callable[..., Any]) -> dict[str, Any]:
    """Annotations with PEP 563 strings resolved and ``Annotated`` kept; ``{}`` on failure."""
    while isinstance(func, functools.partial):
        func = func.func
    target: Any = func
    if not isinstance(func, type) and not inspect.isroutine(func) and callable(func):
        target = type(func).__call__  # a callable object: its __call__ holds the hints
    try:
        return typing.get_type_hints(target, include_extras=True)
    except Exception:  # unresolvable forward references: fall back to raw annotations
        return dict(getattr(target, "__annotations__", {}))


def function_input_schema(func: Callable[..., Any]) -> dict[str, Any]:
    """The JSON schema of ``func``'s parameters (see the module docstring).

    ``self``, ``cls``, ``_agent_state``, ``emit`` and ``*args`` / ``**kwargs`` are left out.

    Raises:
        ValueError: a positional-only parameter (tool arguments are passed by keyword).
    """
    doc = parse_docstring(callable_docstring(func))
    hints = resolve_type_hints(func)
    builder = _Builder()
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, param in inspect.signature(func).parameters.items():
        if name in EXCLUDED_PARAMETERS or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        if param.kind == param.POSITIONAL_ONLY:
            raise ValueError(
                f"parameter {name!r} of {callable_name(func)} is positional-only; "
                "tool arguments are passed by keyword"
            )
        annotation = hints.get(name, param.annotation)
        properties[name] = builder.field(
            annotation, doc.params.get(name), param.default, param.default is param.empty
        )
        if param.default is param.empty:
            required.append(name)
    return builder.finish(properties, required)


def needs_structuring(annotation: Any) -> bool:
    """Whether a JSON value must be converted to match ``annotation`` (classes, enums inside)."""
    if _is_model_class(annotation):
        return True
    return any(needs_structuring(arg) for arg in get_args(annotation) if not isinstance(arg, str))


def _is_model_class(tp: Any) -> bool:
    return isinstance(tp, type) and (
        attrs.has(tp)
        or dataclasses.is_dataclass(tp)
        or issubclass(tp, enum.Enum)
        or _is_pydantic_model(tp)
    )


def _is_pydantic_model(tp: Any) -> bool:
    return isinstance(tp, type) and callable(getattr(tp, "model_json_schema", None))


def _jsonable_default(value: Any) -> tuple[bool, Any]:
    """``(True, value as JSON)`` or ``(False, None)`` when it cannot be shown to the model."""
    if isinstance(value, enum.Enum):
        value = value.value
    elif attrs.has(type(value)) or dataclasses.is_dataclass(value):
        from ..serialization import unstructure

        try:
            value = unstructure(value)
        except Exception:  # not representable: leave the default out of the schema
            return False, None
    elif isinstance(value, tuple | frozenset | set):
        value = list(value)
    try:
        return True, json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError):
        return False, None


class _Builder:
    """Builds property schemas, collecting class definitions under ``$defs``."""

    def __init__(self) -> None:
        self.defs: dict[str, Any] = {}
        self._owners: dict[str, Any] = {}

    def finish(self, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
        schema: dict[str, Any] = {"type": "object", "properties": properties}
        if required:
            schema["required"] = required
        if self.defs:
            schema["$defs"] = self.defs
        return schema

    def field(
        self, annotation: Any, description: str | None, default: Any, required: bool
    ) -> dict[str, Any]:
        schema = self.build(annotation)
        if description:
            schema["description"] = description
        if not required:
            ok, value = _jsonable_default(default)
            if ok:
                schema["default"] = value
        return schema

    def build(self, tp: Any) -> dict[str, Any]:
        """A fresh schema dict for ``tp``."""
        if tp is inspect.Parameter.empty or tp is Any or isinstance(tp, str | typing.ForwardRef):
            return {}
        origin = get_origin(tp)
        args = get_args(tp)
        if origin is Annotated:
            return self._annotated(args[0], tp.__metadata__)
        if tp in _SCALARS:
            return dict(_SCALARS[tp])
        if origin is Literal:
            return _literal(args)
        if origin is Union or origin is types.UnionType:
            return {"anyOf": [self.build(arg) for arg in args]}
        if isinstance(tp, type) and issubclass(tp, enum.Enum):
            return self._ref(tp, self._enum_def)
        if tp in _ARRAY_ORIGINS or origin in _ARRAY_ORIGINS:
            return {"items": self.build(args[0]) if args else {}, "type": "array"}
        if tp in _SET_ORIGINS or origin in _SET_ORIGINS:
            items = self.build(args[0]) if args else {}
            return {"items": items, "type": "array", "uniqueItems": True}
        if tp is tuple or origin is tuple:
            return self._tuple(args)
        if tp in _MAPPING_ORIGINS or origin in _MAPPING_ORIGINS:
            value = args[1] if len(args) == 2 else Any
            extra: Any = True if value is Any else self.build(value)
            return {"additionalProperties": extra, "type": "object"}
        if isinstance(tp, type) and (attrs.has(tp) or dataclasses.is_dataclass(tp)):
            return self._ref(tp, self._class_def)
        if _is_pydantic_model(tp):
            return self._ref(tp, self._pydantic_def)
        return {}

    def _annotated(self, base: Any, metadata: tuple[Any, ...]) -> dict[str, Any]:
        schema = self.build(base)
        for item in metadata:
            if isinstance(item, str):
                schema["description"] = item
                continue
            description = getattr(item, "description", None)
            if isinstance(description, str) and description:
                schema["description"] = description
            for constraint in [item, *(getattr(item, "metadata", None) or [])]:
                _apply_constraint(schema, constraint)
        return schema

    def _tuple(self, args: tuple[Any, ...]) -> dict[str, Any]:
        if not args:
            return {"items": {}, "type": "array"}
        if len(args) == 2 and args[1] is Ellipsis:
            return {"items": self.build(args[0]), "type": "array"}
        return {
            "maxItems": len(args),
            "minItems": len(args),
            "prefixItems": [self.build(arg) for arg in args],
            "type": "array",
        }

    def _ref(self, cls: type, make: Callable[[type], dict[str, Any]]) -> dict[str, Any]:
        name = cls.__name__
        if self._owners.get(name, cls) is not cls:
            name = f"{cls.__module__}__{cls.__qualname__}".replace(".", "__")
        if name not in self._owners:
            self._owners[name] = cls
            self.defs[name] = {}  # placeholder: recursive classes refer to themselves
            self.defs[name] = make(cls)
        return {"$ref": f"#/$defs/{name}"}

    def _enum_def(self, cls: type) -> dict[str, Any]:
        schema = _literal(tuple(member.value for member in cls))  # type: ignore[attr-defined]
        if "const" in schema:
            schema["enum"] = [schema.pop("const")]
        doc = cls.__dict__.get("__doc__")
        if doc:
            schema = {"description": inspect.cleandoc(doc), **schema}
        return schema

    def _class_def(self, cls: type) -> dict[str, Any]:
        doc = parse_docstring(cls.__dict__.get("__doc__"))
        hints = resolve_type_hints(cls)
        properties: dict[str, Any] = {}
        required: list[str] = []
        for name, annotation, default, has_default in _class_fields(cls, hints):
            properties[name] = self.field(
                annotation, doc.params.get(name), default, not has_default
            )
            if not has_default:
                required.append(name)
        schema: dict[str, Any] = {}
        if doc.description:
            schema["description"] = doc.description
        schema.update({"properties": properties, "type": "object"})
        if required:
            schema["required"] = required
        return schema

    def _pydantic_def(self, cls: type) -> dict[str, Any]:
        schema: dict[str, Any] = cls.model_json_schema(  # type: ignore[attr-defined]
            ref_template="#/$defs/{model}"
        )
        for name, sub in schema.pop("$defs", {}).items():
            self.defs.setdefault(name, sub)
            self._owners.setdefault(name, cls)
        return remove_title_field(schema)


def _class_fields(cls: type, hints: dict[str, Any]) -> list[tuple[str, Any, Any, bool]]:
    """``(init name, annotation, default, has_default)`` for an attrs class or dataclass.

    A factory default makes the field optional without recording a ``default`` (as pydantic).
    """
    fields: list[tuple[str, Any, Any, bool]] = []
    if attrs.has(cls):
        for field in attrs.fields(cls):
            if not field.init:
                continue
            annotation = hints.get(field.name, field.type if field.type is not None else Any)
            name = field.alias or field.name
            if field.default is attrs.NOTHING:
                fields.append((name, annotation, None, False))
            elif isinstance(field.default, attrs.Factory):  # type: ignore[arg-type]
                fields.append((name, annotation, _NO_DEFAULT, True))
            else:
                fields.append((name, annotation, field.default, True))
        return fields
    for dc_field in dataclasses.fields(cls):
        if not dc_field.init:
            continue
        annotation = hints.get(dc_field.name, dc_field.type)
        if dc_field.default is not dataclasses.MISSING:
            fields.append((dc_field.name, annotation, dc_field.default, True))
        elif dc_field.default_factory is not dataclasses.MISSING:
            fields.append((dc_field.name, annotation, _NO_DEFAULT, True))
        else:
            fields.append((dc_field.name, annotation, None, False))
    return fields


class _NoDefault:
    """A default produced by a factory: optional, but not shown (not JSON-serializable)."""


_NO_DEFAULT = _NoDefault()


def _literal(values: tuple[Any, ...]) -> dict[str, Any]:
    plain = [v.value if isinstance(v, enum.Enum) else v for v in values]
    kinds = {_json_type(v) for v in plain}
    schema: dict[str, Any] = {"const": plain[0]} if len(plain) == 1 else {"enum": plain}
    if len(kinds) == 1 and None not in kinds:
        schema["type"] = kinds.pop()
    return schema


def _json_type(value: Any) -> str | None:
    if value is None:
        return "null"
    for kind, name in ((bool, "boolean"), (int, "integer"), (float, "number"), (str, "string")):
        if isinstance(value, kind):
            return name
    return None


def _apply_constraint(schema: dict[str, Any], item: Any) -> None:
    for attr, keyword in _CONSTRAINTS.items():
        value = getattr(item, attr, None)
        if isinstance(value, int | float) and not isinstance(value, bool):
            schema[keyword] = value
    is_array = schema.get("type") == "array"
    for attr, (string_kw, array_kw) in {
        "min_length": ("minLength", "minItems"),
        "max_length": ("maxLength", "maxItems"),
    }.items():
        value = getattr(item, attr, None)
        if isinstance(value, int) and not isinstance(value, bool):
            schema[array_kw if is_array else string_kw] = value
