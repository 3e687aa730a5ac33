"""What a function or class declares: names, docstrings, resolved annotations, record fields.

Annotations are resolved one at a time when some cannot be (a forward reference to an unknown
name): the others still get their types, and the unresolvable ones are reported so that their
schema can accept anything.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import logging
import sys
import types
import typing
from collections.abc import Callable, Iterator

import attrs

__all__ = [
    "NO_SHOWN_DEFAULT",
    "RecordField",
    "callable_docstring",
    "callable_name",
    "class_docstring",
    "is_field_class",
    "is_named_tuple",
    "is_record_class",
    "record_fields",
    "resolve_hints",
    "resolve_type_hints",
]

logger = logging.getLogger("trioagent.tool")


def callable_name(func: Callable[..., object]) -> str:
    """The name of a function, unwrapping ``functools.partial`` (an explicit ``__name__`` wins)."""
    while isinstance(func, functools.partial):
        explicit = vars(func).get("__name__")
        if explicit is not None:
            return str(explicit)
        func = func.func
    name = getattr(func, "__name__", None)
    return str(name) if name else type(func).__name__


def callable_docstring(func: Callable[..., object]) -> str:
    """The docstring of a function, unwrapping partials (an explicit ``__doc__`` wins)."""
    while isinstance(func, functools.partial):
        if "__doc__" in vars(func):
            return func.__doc__ or ""
        func = func.func
    return inspect.getdoc(func) or ""


def resolve_type_hints(func: object) -> dict[str, object]:
    """Annotations with PEP 563 strings resolved and ``Annotated`` kept.

    Each annotation is resolved on its own: one that cannot be (a forward reference to an
    unknown name) stays as written, the others are still resolved.
    """
    return resolve_hints(func)[0]


def resolve_hints(func: object) -> tuple[dict[str, object], list[str]]:
    """``(hints, names of the annotations that could not be resolved)``; see above."""
    while isinstance(func, functools.partial):
        func = func.func
    target = func
    if not isinstance(func, type) and not inspect.isroutine(func) and callable(func):
        target = type(func).__call__  # a callable object: its __call__ holds the hints
    try:
        return typing.get_type_hints(target, include_extras=True), []
    except Exception:  # some annotation is unresolvable: resolve them one at a time
        pass
    hints: dict[str, object] = {}
    failed: list[str] = []
    for name, annotation, holder, globalns, localns in _annotation_scopes(target):
        try:
            holder.__annotations__ = {name: annotation}
            resolved = typing.get_type_hints(holder, globalns, localns, include_extras=True)
            hints[name] = resolved[name]
        except Exception:  # keep it as written: its schema accepts anything
            hints[name] = annotation
            failed.append(name)
        else:
            if name in failed:  # a subclass annotation that resolves overrides a base's
                failed.remove(name)
    return hints, failed


_Scope = tuple[str, object, object, dict[str, object] | None, dict[str, object] | None]


def _annotation_scopes(target: object) -> Iterator[_Scope]:
    """``(name, annotation, holder, globalns, localns)`` to resolve each annotation of ``target``
    alone as :func:`typing.get_type_hints` would (class annotations base classes first)."""
    if isinstance(target, type):
        for base in reversed(target.__mro__):
            module = sys.modules.get(base.__module__)
            module_ns = vars(module) if module is not None else {}
            class_ns = dict(vars(base))
            for name, annotation in dict(inspect.get_annotations(base)).items():
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


def class_docstring(cls: type) -> str | None:
    """The class's own docstring; ``None`` for the signature a dataclass or a ``NamedTuple``
    gets without one."""
    doc = cls.__dict__.get("__doc__")
    if doc and is_named_tuple(cls):
        fields: tuple[str, ...] = getattr(cls, "_fields", ())
        if doc == f"{cls.__name__}({', '.join(fields)})":
            return None
    if doc and dataclasses.is_dataclass(cls):
        try:
            generated = cls.__name__ + str(inspect.signature(cls)).replace(" -> None", "")
        except (TypeError, ValueError):
            generated = cls.__name__
        if doc == generated:
            return None
    return doc if isinstance(doc, str) else None


class _NoShownDefault:
    """A default produced by a factory: optional, but not shown (not JSON-serializable)."""


#: The default of a field whose default comes from a factory.
NO_SHOWN_DEFAULT = _NoShownDefault()


@attrs.frozen
class RecordField:
    """One ``__init__`` argument of an attrs class or dataclass.

    ``key`` is the argument's name (an attrs field's alias), which is also the key its JSON
    object uses; ``name`` is the attribute.  ``default`` is :data:`NO_SHOWN_DEFAULT` for a
    factory default; it means nothing when ``required``.
    """

    key: str
    name: str
    annotation: object
    required: bool
    default: object = None


def is_record_class(tp: object) -> bool:
    """Whether ``tp`` (or its generic origin) is an attrs class or a dataclass."""
    cls = typing.get_origin(tp) or tp
    return isinstance(cls, type) and (attrs.has(cls) or dataclasses.is_dataclass(cls))


def is_named_tuple(tp: object) -> bool:
    """Whether ``tp`` is a ``typing.NamedTuple`` (or ``collections.namedtuple``) class."""
    return isinstance(tp, type) and issubclass(tp, tuple) and hasattr(tp, "_fields")


def is_field_class(tp: object) -> bool:
    """Whether ``tp`` is built from named fields a JSON object can carry: an attrs class, a
    dataclass, a ``TypedDict`` or a ``NamedTuple``."""
    return is_record_class(tp) or typing.is_typeddict(tp) or is_named_tuple(tp)


def _required_key(annotation: object, required: bool) -> tuple[object, bool]:
    """``Required[X]`` / ``NotRequired[X]`` → ``X`` and whether the key is required (read
    from the annotation too: ``__required_keys__`` misses them under postponed annotations)."""
    origin = typing.get_origin(annotation)
    if origin is typing.Required or origin is typing.NotRequired:
        return typing.get_args(annotation)[0], origin is typing.Required
    return annotation, required


def record_fields(cls: type) -> list[RecordField]:
    """The fields of an attrs class, dataclass, ``TypedDict`` or ``NamedTuple``, in order.

    A ``TypedDict`` key is required as its class says (``total``, ``Required`` /
    ``NotRequired``); an optional one has no default.  A ``NamedTuple`` field is optional
    when it has a default.

    A field whose annotation cannot be resolved is annotated ``object`` (with a warning).
    """
    hints, unresolved = resolve_hints(cls)

    def hint(name: str, declared: object) -> object:
        if name in unresolved:
            logger.warning(
                "cannot resolve the annotation %r of field %r of %s; its schema accepts any value",
                hints.get(name, declared),
                name,
                cls.__qualname__,
            )
            return object
        return hints.get(name, declared)

    fields: list[RecordField] = []
    if typing.is_typeddict(cls):
        required_keys: frozenset[str] = getattr(cls, "__required_keys__", frozenset())
        for key in hints:
            annotation, required = _required_key(hint(key, object), key in required_keys)
            fields.append(RecordField(key, key, annotation, required, NO_SHOWN_DEFAULT))
        return fields
    if is_named_tuple(cls):
        defaults: dict[str, object] = getattr(cls, "_field_defaults", {})
        for name in cls._fields:  # type: ignore[attr-defined]
            required = name not in defaults
            fields.append(RecordField(name, name, hint(name, object), required, defaults.get(name)))
        return fields
    if attrs.has(cls):
        for field in attrs.fields(cls):
            if not field.init:
                continue
            annotation = hint(field.name, field.type if field.type is not None else object)
            key = field.alias or field.name
            default: object = field.default
            if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
                default = NO_SHOWN_DEFAULT
            required = default is attrs.NOTHING
            fields.append(RecordField(key, field.name, annotation, required, default))
        return fields
    for dc_field in dataclasses.fields(cls):
        if not dc_field.init:
            continue
        annotation = hint(dc_field.name, dc_field.type)
        required = False
        if dc_field.default is not dataclasses.MISSING:
            default = dc_field.default
        elif dc_field.default_factory is not dataclasses.MISSING:
            default = NO_SHOWN_DEFAULT
        else:
            default, required = None, True
        fields.append(RecordField(dc_field.name, dc_field.name, annotation, required, default))
    return fields
