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
                            (with its nested definitions, renamed when a different class
                            already holds the name)
==========================  ===============================================================

A parameter's docstring text becomes its ``description`` (next to ``$ref`` for classes); a
default is recorded as ``default`` (when JSON-serializable) and makes the parameter optional.
Two different classes with the same name get distinct ``$defs`` names (the second one
qualified by its module).  An annotation that cannot be resolved (a forward reference to an
unknown name) gives ``{}`` for that parameter alone, with a warning.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import enum
import functools
import inspect
import itertools
import json
import logging
import re
import sys
import types
import typing
from collections.abc import Callable, Iterator
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import attrs

from ._docstring import parse_docstring

__all__ = [
    "EXCLUDED_PARAMETERS",
    "callable_docstring",
    "callable_name",
    "function_input_schema",
    "remove_title_field",
    "resolve_type_hints",
]

logger = logging.getLogger("trioagent.tool")

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
_DEFS_REF = "#/$defs/"
# Keywords whose value maps names to schemas, and keywords that hold instance data (verbatim).
_SCHEMA_MAP_KEYWORDS = frozenset({"properties", "patternProperties", "dependentSchemas", "$defs"})
_INSTANCE_VALUE_KEYWORDS = frozenset({"default", "const", "enum", "examples"})


def remove_title_field(schema: dict[str, Any]) -> dict[str, Any]:
    """Drop ``title`` (noise for a model) at the top level and, recursively, in ``properties``
    values, ``items``, dict-valued ``additionalProperties``, the members of ``anyOf`` /
    ``oneOf`` / ``allOf`` / ``prefixItems`` and every dict under ``$defs``."""
    schema.pop("title", None)
    for prop in (schema.get("properties") or {}).values():
        if isinstance(prop, dict):
            remove_title_field(prop)
    for key in ("items", "additionalProperties", "not"):
        if isinstance(schema.get(key), dict):
            remove_title_field(schema[key])
    for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
        members = schema.get(key)
        if isinstance(members, list):
            for member in members:
                if isinstance(member, dict):
                    remove_title_field(member)
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
    """Annotations with PEP 563 strings resolved and ``Annotated`` kept.

    Each annotation is resolved on its own: one that cannot be (a forward reference to an
    unknown name) stays as written, the others are still resolved.
    """
    return _resolve_hints(func)[0]


def _resolve_hints(func: Any) -> tuple[dict[str, Any], list[str]]:
    """``(hints, names of the annotations that could not be resolved)``; see above."""
    while isinstance(func, functools.partial):
        func = func.func
    target: Any = func
    if not isinstance(func, type) and not inspect.isroutine(func) and callable(func):
        target = type(func).__call__  # a callable object: its __call__ holds the hints
    try:
        return typing.get_type_hints(target, include_extras=True), []
    except Exception:  # some annotation is unresolvable: resolve them one at a time
        pass
    hints: dict[str, Any] = {}
    failed: list[str] = []
    for name, annotation, holder, globalns, localns in _annotation_scopes(target):
        try:
            holder.__annotations__ = {name: annotation}
            hints[name] = typing.get_type_hints(holder, globalns, localns, include_extras=True)[
                name
            ]
        except Exception:  # keep it as written: its schema accepts anything
            hints[name] = annotation
            failed.append(name)
        else:
            if name in failed:  # a subclass annotation that resolves overrides a base's
                failed.remove(name)
    return hints, failed


def _annotation_scopes(target: Any) -> Iterator[tuple[str, Any, Any, Any, Any]]:
    """``(name, annotation, holder, globalns, localns)`` to resolve each annotation of ``target``
    alone as :func:`typing.get_type_hints` would (class annotations base classes first)."""
    if isinstance(target, type):
        for base in reversed(target.__mro__):
            annotations = inspect.get_annotations(base)
            module = sys.modules.get(base.__module__)
            module_ns = vars(module) if module is not None else {}
            class_ns = dict(vars(base))
            for name, annotation in dict(annotations).items():
                # the class namespace as globals and the module as locals: module names win,
                # as in get_type_hints
                yield name, annotation, type("_Holder", (), {}), class_ns, module_ns
        return
    unwrapped = target
    while hasattr(unwrapped, "__wrapped__"):
        unwrapped = unwrapped.__wrapped__
    globalns = getattr(unwrapped, "__globals__", {})
    for name, annotation in dict(getattr(target, "__annotations__", None) or {}).items():
        yield name, annotation, types.SimpleNamespace(), globalns, None


def function_input_schema(func: Callable[..., Any]) -> dict[str, Any]:
    """The JSON schema of ``func``'s parameters (see the module docstring).

    ``self``, ``cls``, ``_agent_state``, ``emit`` and ``*args`` / ``**kwargs`` are left out.

    Raises:
        ValueError: a positional-only parameter (tool arguments are passed by keyword).
    """
    doc = parse_docstring(callable_docstring(func))
    hints, unresolved = _resolve_hints(func)
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
        if name in unresolved:
            logger.warning(
                "cannot resolve the annotation %r of parameter %r of %s; "
                "its schema accepts any value",
                annotation,
                name,
                callable_name(func),
            )
            annotation = Any
        properties[name] = builder.field(
            annotation, doc.params.get(name), param.default, param.default is param.empty
        )
        if param.default is param.empty:
            required.append(name)
    return builder.finish(properties, required)


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
        # $defs name -> what it describes: a class, or (pydantic model, its definition name)
        # for a nested pydantic definition whose class is not known
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

    def _ref(self, cls: type, make: Callable[[type, str], dict[str, Any]]) -> dict[str, Any]:
        name, new = self._claim(cls, cls.__name__, _qualified_name(cls))
        if new:
            self.defs[name] = {}  # placeholder: recursive classes refer to themselves
            self.defs[name] = make(cls, name)
        return {"$ref": f"{_DEFS_REF}{name}"}

    def _claim(self, owner: Any, name: str, qualified: str) -> tuple[str, bool]:
        """The ``$defs`` name of ``owner`` and whether it is new (its definition still to add).

        ``name`` if free or already ``owner``'s, else ``qualified`` (numbered if need be): two
        different classes never share a name.
        """
        candidates = itertools.chain(
            (_normalize_name(name), _normalize_name(qualified)),
            (f"{_normalize_name(qualified)}_{n}" for n in itertools.count(2)),
        )
        for candidate in candidates:
            if candidate not in self._owners:
                self._owners[candidate] = owner
                return candidate, True
            if self._owners[candidate] == owner:
                return candidate, False
        raise AssertionError("unreachable")  # pragma: no cover

    def _enum_def(self, cls: type, name: str) -> dict[str, Any]:
        schema = _literal(tuple(member.value for member in cls))  # type: ignore[attr-defined]
        if "const" in schema:
            schema["enum"] = [schema.pop("const")]
        doc = cls.__dict__.get("__doc__")
        if doc:
            schema = {"description": inspect.cleandoc(doc), **schema}
        return schema

    def _class_def(self, cls: type, def_name: str) -> dict[str, Any]:
        doc = parse_docstring(_class_docstring(cls))
        hints, unresolved = _resolve_hints(cls)
        properties: dict[str, Any] = {}
        required: list[str] = []
        for name, annotation, default, has_default in _class_fields(cls, hints, unresolved):
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

    def _pydantic_def(self, cls: type, name: str) -> dict[str, Any]:
        """The model's schema; its nested definitions join ``$defs`` (renamed on a clash)."""
        schema: dict[str, Any] = cls.model_json_schema(  # type: ignore[attr-defined]
            ref_template=_DEFS_REF + "{model}"
        )
        nested: dict[str, Any] = schema.pop("$defs", {})
        renames: dict[str, str] = {}
        ref = schema.get("$ref")
        if list(schema) == ["$ref"] and isinstance(ref, str) and ref[len(_DEFS_REF) :] in nested:
            # a recursive model: the schema refers to the model's own nested definition
            own = ref[len(_DEFS_REF) :]
            renames[own] = name
            schema = nested.pop(own)
        classes = _nested_classes(cls)
        added: dict[str, Any] = {}
        for sub_name, sub in nested.items():
            found = classes.get(sub_name, [])
            if len(found) == 1:  # the class behind the definition: shared with other uses
                owner: Any = found[0]
                qualified = _qualified_name(found[0])
            else:
                owner = (cls, sub_name)
                qualified = f"{_qualified_name(cls)}.{sub_name}"
            renames[sub_name], new = self._claim(owner, sub_name, qualified)
            if new:
                added[renames[sub_name]] = sub
        for def_name, sub in added.items():
            self.defs[def_name] = remove_title_field(_rename_refs(sub, renames))
        return remove_title_field(_rename_refs(schema, renames))


def _normalize_name(name: str) -> str:
    """A ``$defs`` name from a class name (as pydantic does: ``[A-Za-z0-9_-]``, ``.`` → ``__``)."""
    normalized: str = re.sub(r"[^a-zA-Z0-9.\-_]", "_", name)
    return normalized.replace(".", "__")


def _qualified_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _class_docstring(cls: type) -> str | None:
    """The class's own docstring; ``None`` for the signature a dataclass gets without one."""
    doc = cls.__dict__.get("__doc__")
    if doc and dataclasses.is_dataclass(cls):
        try:
            generated = cls.__name__ + str(inspect.signature(cls)).replace(" -> None", "")
        except (TypeError, ValueError):
            generated = cls.__name__
        if doc == generated:
            return None
    return doc if isinstance(doc, str) else None


def _nested_classes(model: type) -> dict[str, list[type]]:
    """The classes reachable from a pydantic model's fields, by ``__name__``."""
    found: dict[str, list[type]] = {}
    seen: set[int] = set()

    def visit(tp: Any) -> None:
        if isinstance(tp, type):
            if id(tp) in seen:
                return
            seen.add(id(tp))
            found.setdefault(tp.__name__, []).append(tp)
            fields = getattr(tp, "model_fields", None)
            if isinstance(fields, dict):
                for field in fields.values():
                    visit(getattr(field, "annotation", None))
            elif (
                dataclasses.is_dataclass(tp)
                or typing.is_typeddict(tp)
                or attrs.has(tp)
                or (issubclass(tp, tuple) and hasattr(tp, "_fields"))  # a NamedTuple
            ):
                for hint in resolve_type_hints(tp).values():
                    visit(hint)
        for arg in get_args(tp):
            visit(arg)

    visit(model)
    return found


def _rename_refs(schema: Any, renames: dict[str, str]) -> Any:
    """A copy of ``schema`` with each ``#/$defs/old`` reference renamed per ``renames``."""
    if isinstance(schema, list):
        return [_rename_refs(item, renames) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "$ref" and isinstance(value, str) and value.startswith(_DEFS_REF):
            target = value[len(_DEFS_REF) :]
            out[key] = _DEFS_REF + renames.get(target, target)
        elif key in _INSTANCE_VALUE_KEYWORDS:
            out[key] = value
        elif key in _SCHEMA_MAP_KEYWORDS and isinstance(value, dict):
            out[key] = {name: _rename_refs(sub, renames) for name, sub in value.items()}
        else:
            out[key] = _rename_refs(value, renames)
    return out


def _class_fields(
    cls: type, hints: dict[str, Any], unresolved: list[str]
) -> list[tuple[str, Any, Any, bool]]:
    """``(init name, annotation, default, has_default)`` for an attrs class or dataclass.

    A factory default makes the field optional without recording a ``default`` (as pydantic).
    A field whose annotation cannot be resolved accepts anything (with a warning).
    """

    def hint(name: str, declared: Any) -> Any:
        if name in unresolved:
            logger.warning(
                "cannot resolve the annotation %r of field %r of %s; its schema accepts any value",
                hints.get(name, declared),
                name,
                cls.__qualname__,
            )
            return Any
        return hints.get(name, declared)

    fields: list[tuple[str, Any, Any, bool]] = []
    if attrs.has(cls):
        for field in attrs.fields(cls):
            if not field.init:
                continue
            annotation = hint(field.name, field.type if field.type is not None else Any)
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
        annotation = hint(dc_field.name, dc_field.type)
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
