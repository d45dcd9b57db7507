"""Dataclass records <-> JSON, checked on the way in, and the JSON Schema of a record, all from the type hints.

One walk over the annotations serves the three, so the reader, the writer and the shipped schema cannot drift:
``str``, ``int``, ``float`` (finite), ``bool``, ``None``, enums, ``list``/``tuple``/``dict[str, ...]``, unions and
nested dataclasses. A field with a default may be absent; any other absent field, an unknown key, a wrong type or a
non-finite number is a ``FormatError`` naming its JSON path.

A field whose metadata has ``EXTRAS`` (a function: key -> type) holds sections registered elsewhere (a phase's,
``results/result_sections.py``): they are written as keys of the record itself, after its fields, and read back by their type.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from enum import Enum
from functools import cache
from typing import Any, TypeVar, Union

T = TypeVar("T")
_NONE = type(None)
_JSON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean", _NONE: "null"}
EXTRAS = "extras"  # field metadata key: a function returning the registered sections' names and types


class FormatError(ValueError):
    """A JSON document that does not fit the record: ``path`` is where (``cases.a.status``), ``problem`` what."""

    def __init__(self, path: str, problem: str) -> None:
        self.path = path or "(top level)"
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _fields(cls: type) -> list[tuple[dataclasses.Field, Any]]:
    hints = _hints(cls)
    return [(f, hints[f.name]) for f in dataclasses.fields(cls) if f.init and EXTRAS not in f.metadata]


def _extras(cls: type) -> tuple[str | None, dict[str, Any]]:
    """The field holding registered sections (or None) and their types by key."""
    for f in dataclasses.fields(cls):
        if EXTRAS in f.metadata:
            return f.name, dict(f.metadata[EXTRAS]())
    return None, {}


def _has_default(f: dataclasses.Field) -> bool:
    return f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING


def _is_union(tp: Any) -> bool:
    return typing.get_origin(tp) in (Union, types.UnionType)


def _describe(value: Any) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", int: "an integer"}
    names.update({float: "a number", _NONE: "null"})
    return names.get(type(value), type(value).__name__)


def _expected(tp: Any) -> str:
    if dataclasses.is_dataclass(tp) or typing.get_origin(tp) is dict:
        return "an object"
    if typing.get_origin(tp) in (list, tuple):
        return "an array"
    if isinstance(tp, type) and issubclass(tp, Enum):
        return "one of " + "|".join(str(m.value) for m in tp)
    if _is_union(tp):
        return " or ".join(_expected(arg) for arg in typing.get_args(tp))
    return {str: "a string", int: "an integer", float: "a number", bool: "a boolean", _NONE: "null"}.get(tp, str(tp))


def _join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def from_json(tp: Any, value: Any, path: str = "") -> Any:
    """``value`` (parsed JSON) as ``tp``; a ``FormatError`` at the first misfit."""
    if _is_union(tp):
        args = typing.get_args(tp)
        if value is None and _NONE in args:
            return None
        errors = []
        for arg in (a for a in args if a is not _NONE):
            try:
                return from_json(arg, value, path)
            except FormatError as exc:
                errors.append(exc)
        if len(errors) == 1:
            raise errors[0]
        raise FormatError(path, f"expected {_expected(tp)}, got {_describe(value)}")
    origin = typing.get_origin(tp)
    if origin in (list, tuple):
        if not isinstance(value, list):
            raise FormatError(path, f"expected an array, got {_describe(value)}")
        (item,) = typing.get_args(tp)[:1]
        items = [from_json(item, v, _join(path, i)) for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if origin is dict:
        if not isinstance(value, dict):
            raise FormatError(path, f"expected an object, got {_describe(value)}")
        _, item = typing.get_args(tp)
        return {str(k): from_json(item, v, _join(path, str(k))) for k, v in value.items()}
    if dataclasses.is_dataclass(tp):
        return _dataclass_from_json(tp, value, path)
    if isinstance(tp, type) and issubclass(tp, Enum):
        try:
            return tp(value)
        except ValueError:
            raise FormatError(path, f"expected {_expected(tp)}, got {value!r:.60}") from None
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise FormatError(path, f"expected a number, got {_describe(value)}")
        if not math.isfinite(value):
            raise FormatError(path, f"expected a finite number, got {value}")
        return float(value) if isinstance(value, float) else value
    if tp is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise FormatError(path, f"expected an integer, got {_describe(value)}")
    if tp in (str, bool, _NONE) and type(value) is not tp:
        raise FormatError(path, f"expected {_expected(tp)}, got {_describe(value)}")
    return value


def _dataclass_from_json(cls: type[T], value: Any, path: str) -> T:
    if not isinstance(value, dict):
        raise FormatError(path, f"expected an object, got {_describe(value)}")
    fields = _fields(cls)
    extras_field, extras = _extras(cls)
    known = {f.name for f, _ in fields} | set(extras)
    unknown = sorted(set(value) - known)
    if unknown:
        raise FormatError(_join(path, unknown[0]), f"unknown field (a {cls.__name__} has {', '.join(sorted(known))})")
    kwargs: dict[str, Any] = {}
    if extras_field is not None:
        kwargs[extras_field] = {k: from_json(tp, value[k], _join(path, k)) for k, tp in extras.items() if k in value}
    for f, tp in fields:
        if f.name in value:
            kwargs[f.name] = from_json(tp, value[f.name], _join(path, f.name))
        elif not _has_default(f):
            raise FormatError(_join(path, f.name), "missing field")
    return cls(**kwargs)


def to_json(value: Any) -> Any:
    """A record as plain JSON values: dataclasses as objects in field order, enums as their values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {}
        for f in dataclasses.fields(value):
            if EXTRAS in f.metadata:
                out.update({str(k): to_json(v) for k, v in getattr(value, f.name).items()})
            else:
                out[f.name] = to_json(getattr(value, f.name))
        return out
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    return value


def json_schema(root: type, *, schema_id: str, title: str) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of ``root``: one ``$defs`` entry per dataclass and enum."""
    defs: dict[str, Any] = {}
    body = _object_schema(root, defs) if dataclasses.is_dataclass(root) else _schema(root, defs)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": schema_id,
        "title": title,
        **body,
        "$defs": dict(sorted(defs.items())),
    }


def _schema(tp: Any, defs: dict[str, Any]) -> dict[str, Any]:
    if _is_union(tp):
        return {"anyOf": [_schema(arg, defs) for arg in typing.get_args(tp)]}
    origin = typing.get_origin(tp)
    if origin in (list, tuple):
        return {"type": "array", "items": _schema(typing.get_args(tp)[0], defs)}
    if origin is dict:
        return {"type": "object", "additionalProperties": _schema(typing.get_args(tp)[1], defs)}
    if dataclasses.is_dataclass(tp) or (isinstance(tp, type) and issubclass(tp, Enum)):
        name = tp.__name__
        if name not in defs:
            defs[name] = {}  # placeholder: recursion stops here
            defs[name] = _enum_schema(tp) if issubclass(tp, Enum) else _object_schema(tp, defs)
        return {"$ref": f"#/$defs/{name}"}
    return {"type": _JSON_TYPES[tp]}


def _enum_schema(tp: type[Enum]) -> dict[str, Any]:
    return {"enum": [m.value for m in tp], **_description(tp)}


def _object_schema(cls: type, defs: dict[str, Any]) -> dict[str, Any]:
    fields = _fields(cls)
    extras = _extras(cls)[1]
    return {
        "type": "object",
        **_description(cls),
        "properties": {
            **{f.name: _schema(tp, defs) for f, tp in fields},
            **{name: _schema(tp, defs) for name, tp in extras.items()},
        },
        "required": [f.name for f, _ in fields if not _has_default(f)],
        "additionalProperties": False,
    }


def _description(tp: type) -> dict[str, str]:
    doc = tp.__dict__.get("__doc__") or ""
    # dataclasses invent a signature and older enums a sentence when a class has no docstring: not a description
    if not doc or doc.startswith(f"{tp.__name__}(") or doc == "An enumeration.":
        return {}
    return {"description": " ".join(doc.split())}
