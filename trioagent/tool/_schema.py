"""JSON-schema pieces of a tool's input schema: the ``$defs`` of its classes, title removal.

:class:`Definitions` collects the definitions a schema refers to with ``{"$ref":
"#/$defs/Name"}``.  Two different classes never share a name: the second one is qualified by
its module (``pkg__mod__Name``, numbered if need be), as pydantic names them.  A pydantic
model's own schema joins with its nested definitions, renamed where a different class already
holds the name.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
import typing
from collections.abc import Callable

import attrs

from .._core.json_types import JSONObject, JSONValue
from ._hints import resolve_type_hints

__all__ = ["DEFS_REF", "Definitions", "remove_title_field"]

DEFS_REF = "#/$defs/"
# Keywords whose value maps names to schemas, and keywords that hold instance data (verbatim).
_SCHEMA_MAP_KEYWORDS = frozenset({"properties", "patternProperties", "dependentSchemas", "$defs"})
_INSTANCE_VALUE_KEYWORDS = frozenset({"default", "const", "enum", "examples"})


def remove_title_field(schema: JSONObject) -> JSONObject:
    """Drop ``title`` (noise for a model) at the top level and, recursively, in ``properties``
    values, ``items``, dict-valued ``additionalProperties``, the members of ``anyOf`` /
    ``oneOf`` / ``allOf`` / ``prefixItems`` and every dict under ``$defs``."""
    schema.pop("title", None)
    nested: list[JSONValue] = [
        *(schema.get("properties") or {}).values(),
        *(schema.get(key) for key in ("items", "additionalProperties", "not")),
        *(
            member
            for key in ("anyOf", "oneOf", "allOf", "prefixItems")
            if isinstance(schema.get(key), list)
            for member in schema[key]
        ),
    ]
    if isinstance(schema.get("$defs"), dict):
        nested.extend(schema["$defs"].values())
    for sub in nested:
        if isinstance(sub, dict):
            remove_title_field(sub)
    return schema


class Definitions:
    """The ``$defs`` of one schema under construction."""

    def __init__(self) -> None:
        self.defs: JSONObject = {}
        # $defs name -> what it describes: a class, or (pydantic model, its definition name)
        # for a nested pydantic definition whose class is not known
        self._owners: dict[str, object] = {}

    def ref(self, cls: type, define: Callable[[str], JSONObject]) -> JSONObject:
        """``{"$ref": ...}`` to ``cls``'s definition, made by ``define(name)`` the first time."""
        name, new = self._claim(cls, cls.__name__, _qualified_name(cls))
        if new:
            self.defs[name] = {}  # placeholder: recursive classes refer to themselves
            self.defs[name] = define(name)
        return {"$ref": f"{DEFS_REF}{name}"}

    def pydantic_ref(self, model: type) -> JSONObject:
        """``{"$ref": ...}`` to a pydantic model's own schema (titles removed)."""
        return self.ref(model, lambda name: self._import_pydantic(model, name))

    def _claim(self, owner: object, name: str, qualified: str) -> tuple[str, bool]:
        """The ``$defs`` name of ``owner`` and whether it is new (its definition still to add).

        ``name`` if free or already ``owner``'s, else ``qualified`` (numbered if need be).
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

    def _import_pydantic(self, model: type, name: str) -> JSONObject:
        """The model's schema; its nested definitions join ``$defs`` (renamed on a clash)."""
        schema: JSONObject = model.model_json_schema(  # type: ignore[attr-defined]
            ref_template=DEFS_REF + "{model}"
        )
        nested: JSONObject = schema.pop("$defs", {})
        renames: dict[str, str] = {}
        ref = schema.get("$ref")
        if list(schema) == ["$ref"] and isinstance(ref, str) and ref[len(DEFS_REF) :] in nested:
            # a recursive model: the schema refers to the model's own nested definition
            own = ref[len(DEFS_REF) :]
            renames[own] = name
            schema = nested.pop(own)
        classes = _nested_classes(model)
        added: JSONObject = {}
        for sub_name, sub in nested.items():
            found = classes.get(sub_name, [])
            if len(found) == 1:  # the class behind the definition: shared with other uses
                owner: object = found[0]
                qualified = _qualified_name(found[0])
            else:
                owner = (model, sub_name)
                qualified = f"{_qualified_name(model)}.{sub_name}"
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


def _nested_classes(model: type) -> dict[str, list[type]]:
    """The classes reachable from a pydantic model's fields, by ``__name__``."""
    found: dict[str, list[type]] = {}
    seen: set[int] = set()

    def visit(tp: object) -> None:
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
        for arg in typing.get_args(tp):
            visit(arg)

    visit(model)
    return found


def _rename_refs(schema: JSONValue, renames: dict[str, str]) -> JSONValue:
    """A copy of ``schema`` with each ``#/$defs/old`` reference renamed per ``renames``."""
    if isinstance(schema, list):
        return [_rename_refs(item, renames) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out: JSONObject = {}
    for key, value in schema.items():
        if key == "$ref" and isinstance(value, str) and value.startswith(DEFS_REF):
            target = value[len(DEFS_REF) :]
            out[key] = DEFS_REF + renames.get(target, target)
        elif key in _INSTANCE_VALUE_KEYWORDS:
            out[key] = value
        elif key in _SCHEMA_MAP_KEYWORDS and isinstance(value, dict):
            out[key] = {name: _rename_refs(sub, renames) for name, sub in value.items()}
        else:
            out[key] = _rename_refs(value, renames)
    return out
