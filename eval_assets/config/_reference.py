"""The configuration reference (`docs/reference/configuration.md`), generated from the models.

Every field of every file a project holds (scenarios, rubrics, judges, build manifests, evaltrack.yaml),
with its type, default, allowed range and description, read from the pydantic models themselves, so the
reference cannot say what the loader does not do. `scripts/config_reference` writes the file; a
fast-lane test fails when the checked-in file differs from what this module makes.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Iterator
from typing import Any, Literal, Union, get_args, get_origin

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from ._models import BuildManifest, Judge, Rubric, Scenario, SimJudgeKnobs, SimSubjectKnobs
from ._settings import Settings

FILES: tuple[tuple[str, str, type[BaseModel]], ...] = (
    ("Scenario", "`scenarios/<suite>/<id>.yaml`", Scenario),
    ("Rubric", "`rubrics/<id>.yaml`", Rubric),
    ("Judge version", "`judges/<version>.yaml`", Judge),
    ("Build manifest", "`examples/builds/*.yaml`, registered with `evaltrack build add FILE`", BuildManifest),
    ("Project settings", "`evaltrack.yaml` (optional: every field has a default)", Settings),
    ("Sim subject knobs", "`subject.params` of a build whose model is `sim/*`", SimSubjectKnobs),
    ("Sim judge knobs", "`params` of a judge version whose model is `sim/*`", SimJudgeKnobs),
)

_HEAD = """\
# Configuration reference

Generated from the configuration models (`eval_assets/config/`) by `scripts/config_reference`; do not edit
by hand (`tests/test_config_reference.py` fails when this file and the models differ). Every file is
strict: an unknown field, a value of the wrong type (`"5"` for a number, `true` for an integer) or one
outside its range is refused by `evaltrack validate` with `path: field: message`. Nested fields are
written `parent.child`; `[]` marks the items of a list, `{}` the values of a mapping.

Ids (builds, judge names and versions, scenarios) follow one grammar: lower-case letters, digits, `.`,
`_`, `-`, starting with a letter or digit, no `..`, at most 128 characters, not `trend`, `board`, `all`,
`latest` or `none`.
"""


def _unannotated(tp: Any) -> tuple[Any, list[Any]]:
    """The type under any `Annotated[...]` layers, and the metadata those layers carried."""
    found: list[Any] = []
    while get_origin(tp) is typing.Annotated:
        tp, *meta = get_args(tp)
        found += meta
    return tp, found


def _is_union(tp: Any) -> bool:
    return get_origin(tp) in (Union, types.UnionType)


def type_name(tp: Any) -> str:
    """A field's type as the reference writes it: `int`, `list[Message]`, `"fixed" | "adaptive"`."""
    tp, _ = _unannotated(tp)
    origin = get_origin(tp)
    if tp is type(None):
        return "null"
    if tp is Any:
        return "any"
    if origin is Literal:
        return " | ".join(f'"{a}"' if isinstance(a, str) else repr(a) for a in get_args(tp))
    if _is_union(tp):
        return " | ".join(type_name(a) for a in get_args(tp))
    if origin in (list, tuple, set, frozenset):
        inner = [a for a in get_args(tp) if a is not Ellipsis]
        return f"list[{', '.join(type_name(a) for a in inner) or 'any'}]"
    if origin is dict:
        key, value = get_args(tp) or (Any, Any)
        return f"mapping[{type_name(key)}, {type_name(value)}]"
    if isinstance(tp, type):
        return {"str": "string", "bool": "boolean", "int": "integer", "float": "number"}.get(
            tp.__name__, tp.__name__
        )
    return str(tp).replace("typing.", "")


def _constraints(meta: list[Any]) -> list[str]:
    out: list[str] = []
    for m in meta:
        for attr, sign in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
            value = getattr(m, attr, None)
            if (
                value is not None
                and isinstance(m, annotated_types.BaseMetadata | FieldInfo)
                or (value is not None and type(m).__name__ in ("Ge", "Gt", "Le", "Lt", "Interval"))
            ):
                out.append(f"{sign} {value:g}" if isinstance(value, int | float) else f"{sign} {value}")
        for attr, what in (("min_length", "at least"), ("max_length", "at most")):
            value = getattr(m, attr, None)
            if value is not None:
                out.append(f"{what} {value} long")
        pattern = getattr(m, "pattern", None)
        if pattern:
            out.append(f"matches `{pattern}`")
        for nested in getattr(m, "metadata", []) or []:
            out += _constraints([nested])
    return list(dict.fromkeys(out))


def _is_id(meta: list[Any]) -> bool:
    """Whether the metadata holds the id grammar's validator (`_ids.EntityId`)."""
    return any(getattr(getattr(m, "func", None), "__module__", "").endswith("config._ids") for m in meta)


def field_range(info: FieldInfo) -> str:
    """The allowed range a field's annotations and Field() declare, e.g. `>= 2, <= 100`; "" for none.
    Bounds inside an optional are the field's; inside a list or mapping they are each item's (`each`)."""
    found = ["an id (the grammar above)"] if _is_id(list(info.metadata)) else []
    found += _constraints(list(info.metadata))
    stack: list[tuple[Any, str]] = [(info.annotation, "")]
    while stack:
        tp, each = stack.pop()
        inner, meta = _unannotated(tp)
        found += [
            each + c for c in (["an id (the grammar above)"] if _is_id(meta) else []) + _constraints(meta)
        ]
        if _is_union(inner):
            stack += [(a, each) for a in get_args(inner)]
        elif get_origin(inner) in (list, tuple):
            stack += [(a, "each: ") for a in get_args(inner) if a is not Ellipsis]
        elif get_origin(inner) is dict:
            stack += [(get_args(inner)[1], "each value: ")]
    return ", ".join(dict.fromkeys(found))


def default_text(info: FieldInfo) -> str:
    if info.is_required():
        return "required"
    if info.default_factory is not None:
        value = info.default_factory()  # type: ignore[call-arg]
    else:
        value = info.default
    if value is PydanticUndefined:
        return "required"
    if isinstance(value, BaseModel):
        return "(each field's default)"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str):
        return f'"{value}"'
    return f"{value!r}"


def _models_in(tp: Any) -> Iterator[tuple[str, type[BaseModel]]]:
    """The models a field's type holds, with the suffix their fields get (`[]` list items, `{}` values)."""
    tp, _ = _unannotated(tp)
    origin = get_origin(tp)
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        yield "", tp
    elif _is_union(tp):
        for a in get_args(tp):
            yield from _models_in(a)
    elif origin in (list, tuple):
        for a in get_args(tp):
            for suffix, model in _models_in(a):
                yield "[]" + suffix, model
    elif origin is dict:
        for suffix, model in _models_in(get_args(tp)[1]):
            yield "{}" + suffix, model


def rows(model: type[BaseModel], prefix: str = "", seen: tuple[type, ...] = ()) -> Iterator[tuple[str, ...]]:
    """(field, type, default, range, description) for every field of `model`, nested ones after
    their parent (`parent.child`)."""
    for name, info in model.model_fields.items():
        key = f"{prefix}{info.alias or name}"
        description = " ".join((info.description or "").split())
        yield key, type_name(info.annotation), default_text(info), field_range(info), description
        for suffix, nested in _models_in(info.annotation):
            if nested not in seen:
                yield from rows(nested, f"{key}{suffix}.", (*seen, model, nested))


def _cell(text: str) -> str:
    return text.replace("|", "\\|") or "–"


def reference_markdown() -> str:
    """The whole reference, deterministic (what `docs/reference/configuration.md` holds)."""
    out = [_HEAD]
    for title, where, model in FILES:
        out += [f"## {title}", "", f"{where}: `{model.__name__}`.", ""]
        out += ["| field | type | default | range | description |", "| --- | --- | --- | --- | --- |"]
        out += [
            "| " + " | ".join(_cell(c) for c in (f"`{r[0]}`", f"`{r[1]}`", *r[2:])) + " |"
            for r in rows(model)
        ]
        out.append("")
    return "\n".join(out)
