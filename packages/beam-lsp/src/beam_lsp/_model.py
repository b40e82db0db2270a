"""`Model`: the base of Beam's own value types (`lean.py`), frozen attrs classes read from and written to JSON.

Owns the one rule for reading a decoded JSON value into a model (`from_json`: each declared field checked against
its annotation, unknown members kept in `extra`, any mismatch a `ModelError` naming where) and for writing one back
(`wire`: Lean's casing, absent fields omitted, unknown members included, so a value round-trips with everything
Lean said). attrs, like lsprotocol's result types, rather than pydantic: pydantic's schema machinery alone took
20 MiB of a client process's 49 MiB. Supported annotations are the ones `lean.py` uses: `int`, `float`, `str`,
`bool`, `None`, unions, `tuple[X, ...]`, `tuple[X, Y]`, `list[X]`, `dict[str, X]`, `JsonValue` and models.
"""

from __future__ import annotations

import enum
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, TypeAlias, TypeVar, Union

import attrs

__all__ = ["JsonValue", "Model", "ModelError"]

JsonValue: TypeAlias = Union[bool, int, float, str, list["JsonValue"], dict[str, "JsonValue"], None]  # noqa: UP007
"""Any JSON value as Python decodes it (objects as `dict`, arrays as `list`)."""

_Reader = Callable[[object, str], Any]
M = TypeVar("M", bound="Model")


class ModelError(ValueError):
    """A JSON value does not have a model's shape; the message names where (`range.start.line: expected an int`)."""


def _fail(path: str, expected: str, value: object) -> ModelError:
    got = "null" if value is None else type(value).__name__
    return ModelError(f"{path or 'value'}: expected {expected}, got {got}")


def _int(value: object, path: str) -> object:
    if type(value) is int:
        return value
    if isinstance(value, int) and not isinstance(value, bool):  # an IntEnum: its number
        return int(value)
    raise _fail(path, "an int", value)


def _str(value: object, path: str) -> object:
    if type(value) is str:
        return value
    if isinstance(value, str):  # a str enum: its text
        return str.__str__(value)
    raise _fail(path, "a string", value)


def _bool(value: object, path: str) -> object:
    if type(value) is not bool:
        raise _fail(path, "a boolean", value)
    return value


def _float(value: object, path: str) -> object:
    if type(value) is not float and type(value) is not int:
        raise _fail(path, "a number", value)
    return value


def _json(value: object, path: str) -> object:
    return value  # already decoded JSON; what it holds is the caller's to read


def _none(value: object, path: str) -> object:
    if value is not None:
        raise _fail(path, "null", value)
    return None


def _union(readers: list[_Reader], name: str) -> _Reader:
    def read(value: object, path: str) -> object:
        for reader in readers:
            try:
                return reader(value, path)
            except ModelError:
                continue
        raise _fail(path, name, value)

    return read


def _optional(reader: _Reader) -> _Reader:
    def read(value: object, path: str) -> object:
        return None if value is None else reader(value, path)

    return read


def _sequence(item: _Reader, make: type, nullable: bool) -> _Reader:
    def read(value: object, path: str) -> object:
        if value is None and nullable:
            return None
        if type(value) is not list and type(value) is not tuple:
            raise _fail(path, "an array", value)
        out = []
        for i, v in enumerate(value):  # a loop, not a generator: one frame per level of Lean's deep texts
            out.append(item(v, f"{path}[{i}]"))
        return out if make is list else tuple(out)

    return read


def _pair(first: _Reader, second: _Reader, nullable: bool) -> _Reader:
    def read(value: object, path: str) -> object:
        if value is None and nullable:
            return None
        if (type(value) is not list and type(value) is not tuple) or len(value) != 2:
            raise _fail(path, "an array of 2", value)
        return (first(value[0], f"{path}[0]"), second(value[1], f"{path}[1]"))

    return read


def _mapping(item: _Reader, nullable: bool) -> _Reader:
    def read(value: object, path: str) -> object:
        if value is None and nullable:
            return None
        if type(value) is not dict:
            raise _fail(path, "an object", value)
        return {k: item(v, f"{path}.{k}") for k, v in value.items()}

    return read


_SCALARS: frozenset[object] = frozenset({type(None), bool, int, float, str})


def _is_json(annotation: Any) -> bool:
    """Whether `annotation` is `JsonValue` (as `typing.get_type_hints` resolves it, or its name inside itself)."""
    if isinstance(annotation, typing.ForwardRef):
        return annotation.__forward_arg__ == "JsonValue"
    args = typing.get_args(annotation)
    return typing.get_origin(annotation) is Union and _SCALARS <= set(args) and len(args) == len(_SCALARS) + 2


def _reader(annotation: Any) -> _Reader:
    """How to read a value of `annotation` (resolved) from JSON."""
    if annotation is Any or _is_json(annotation):
        return _json
    if annotation is int:
        return _int
    if annotation is str:
        return _str
    if annotation is bool:
        return _bool
    if annotation is float:
        return _float
    if annotation is type(None):
        return _none
    if isinstance(annotation, type) and issubclass(annotation, Model):
        return annotation._read
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    nullable = False
    if origin in (Union, types.UnionType):
        arms = [a for a in args if a is not type(None)]
        if len(arms) > 1:
            inner = _union([_reader(a) for a in arms], str(annotation))
            return _optional(inner) if len(arms) < len(args) else inner
        nullable, annotation = True, arms[0]
        origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return _sequence(_reader(args[0]), tuple, nullable)
    if origin is tuple and len(args) == 2:
        return _pair(_reader(args[0]), _reader(args[1]), nullable)
    if origin is list:
        return _sequence(_reader(args[0]), list, nullable)
    if origin is dict and args[0] is str:
        return _mapping(_reader(args[1]), nullable)
    if nullable:
        return _optional(_reader(annotation))
    raise TypeError(f"unsupported model annotation: {annotation!r}")  # pragma: no cover - a bug in lean.py


def _plain(value: object) -> JsonValue:
    """A field's value as JSON (models by `wire`, tuples as arrays, enums as their value)."""
    if isinstance(value, Model):
        return value.wire()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, enum.Enum):
        plain: JsonValue = value.value
        return plain
    return value  # type: ignore[return-value]  # a JSON scalar (or JsonValue) by construction


@attrs.frozen(kw_only=True)
class Model:
    """Base of Beam's value types: frozen, compared by value, read with `from_json` and written with `wire`.

    Attributes:
        extra: Members of the JSON object that the model does not declare (Lean adds fields over time); `wire`
            writes them back.
    """

    extra: Mapping[str, JsonValue] = attrs.field(factory=dict, repr=False, hash=False)
    _readers: ClassVar[dict[type, tuple[tuple[str, _Reader, bool], ...]]] = {}

    @classmethod
    def from_json(cls: type[M], value: object) -> M:
        """Read a decoded JSON object as this model.

        Raises:
            ModelError: The value does not have the model's shape (a `ValueError`).
        """
        try:
            result: M = cls._read(value, "")
        except RecursionError:  # deeper than any JSON strict_json accepts
            raise ModelError(f"{cls.__name__}: nested too deeply") from None
        return result

    @classmethod
    def _read(cls, value: object, path: str) -> Any:
        specs = Model._readers.get(cls)
        if specs is None:
            hints = typing.get_type_hints(cls)
            specs = tuple(
                (f.name, _reader(hints[f.name]), f.default is attrs.NOTHING)
                for f in attrs.fields(cls)
                if f.name != "extra"
            )
            Model._readers[cls] = specs
        if type(value) is not dict:
            raise _fail(path, f"a {cls.__name__} object", value)
        kwargs: dict[str, Any] = {}
        for name, read, required in specs:
            if name in value:
                kwargs[name] = read(value[name], f"{path}.{name}" if path else name)
            elif required:
                raise ModelError(f"{path or cls.__name__}: missing {name!r}")
        if len(kwargs) != len(value):
            kwargs["extra"] = {k: v for k, v in value.items() if k not in kwargs}
        try:
            return cls(**kwargs)
        except (TypeError, ValueError) as exc:  # a field validator (e.g. a negative position)
            raise ModelError(f"{path or cls.__name__}: {exc}") from None

    def wire(self) -> dict[str, JsonValue]:
        """The value as LSP JSON (Lean casing, absent fields omitted), e.g. to send it back to Lean."""
        out: dict[str, JsonValue] = {}
        for field in attrs.fields(type(self)):
            if field.name == "extra":
                continue
            value = getattr(self, field.name)
            if value is not None:
                out[field.name] = _plain(value)
        out.update(self.extra)
        return out
