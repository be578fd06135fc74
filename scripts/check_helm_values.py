#!/usr/bin/env python3
"""Check every key of a Helm values file against a chart's published values schema (values.schema.json).

    .venv/bin/python scripts/check_helm_values.py --schema PATH/values.schema.json --chart-version 1.13.27 \
        deploy/helm/values.yaml

Stricter than `helm lint`: a key the schema does not declare is reported even where the schema would let
it pass (pydantic-generated schemas leave `additionalProperties` open, so a misspelt or invented key such
as `dagsterInstance` is silently ignored by the chart). An object that declares properties is closed here
whether `additionalProperties` is absent (pydantic 1) or `true` (pydantic 2 writes that for a model with
extra="allow", such as the chart's root and `ingress`); only an object that declares none (a free-form map
such as `additionalInstanceConfig` or `dagsterDaemon.runMonitoring`) takes any key, and nothing below such
a key is checked. Follows local `$ref`s (`#/definitions/...` and `#/$defs/...`), `allOf`/`anyOf`/`oneOf`
and `if`/`then` branches (the chart's run launcher and run coordinator are such conditionals); checks each
value's JSON type and enum. Below an external `$ref` (the Kubernetes object schemas the chart points at by
URL) nothing is checked: those keys are counted and listed as such. Exit 0 when no key is unknown and no
value has a wrong type, 1 otherwise, 2 on unreadable input (naming the file).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

Schema = Mapping[str, Any]
_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "null": (type(None),),
}


@dataclass
class Report:
    checked: int = 0
    unknown: list[str] = field(default_factory=list)
    wrong_type: list[str] = field(default_factory=list)
    external: list[str] = field(default_factory=list)  # keys under an external $ref: not checked

    @property
    def ok(self) -> bool:
        return not self.unknown and not self.wrong_type


class SchemaWalker:
    def __init__(self, root: Schema):
        self.root = root

    def resolve(self, node: Schema) -> Schema | None:
        """`node` with a local $ref followed; None for an external one (a URL) that cannot be followed."""
        seen = 0
        while "$ref" in node:
            ref = str(node["$ref"])
            if not ref.startswith("#/"):
                return None
            target: Any = self.root
            for part in ref[2:].split("/"):
                target = target[part]
            node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
            seen += 1
            if seen > 50:
                raise ValueError(f"$ref cycle at {ref}")
        return node

    def branches(self, node: Schema) -> Iterator[Schema | None]:
        """The node and every branch a value may also have to satisfy (allOf/anyOf/oneOf, if/then/else)."""
        resolved = self.resolve(node)
        yield resolved
        if resolved is None:
            return
        for key in ("allOf", "anyOf", "oneOf"):
            for sub in resolved.get(key, []):
                yield from self.branches(sub)
        for key in ("then", "else"):
            if isinstance(resolved.get(key), Mapping):
                yield from self.branches(resolved[key])


def check(value: Any, node: Schema, walker: SchemaWalker, path: str, report: Report) -> None:
    branches = list(walker.branches(node))
    if any(b is None for b in branches):  # an external schema (Kubernetes objects): not checked below
        report.external += list(_keys(value, path))
        return
    known: list[Schema] = [b for b in branches if b is not None]
    types = {t for b in known for t in _as_list(b.get("type"))}
    if types and not any(_is_type(value, t) for t in types):
        report.wrong_type.append(
            f"{path or '(root)'}: {type(value).__name__} is not {'/'.join(sorted(types))}"
        )
        return
    enums = [b["enum"] for b in known if "enum" in b]
    if enums and not any(value in e for e in enums):
        report.wrong_type.append(f"{path}: {value!r} is not one of {enums[0]}")
    if isinstance(value, dict):
        for key, sub in value.items():
            where = f"{path}.{key}" if path else str(key)
            report.checked += 1
            child = _child(known, str(key))
            if child is None:
                report.unknown.append(where)
                continue
            check(sub, child, walker, where, report)
    elif isinstance(value, list):
        items = [b["items"] for b in known if isinstance(b.get("items"), Mapping)]
        for i, sub in enumerate(value):
            if items:
                check(sub, items[0], walker, f"{path}[{i}]", report)


# The value schema of a free-form map's key: any key below it is accepted and nothing is checked.
_FREE: Schema = {"additionalProperties": True}


def _child(branches: list[Schema], key: str) -> Schema | None:
    """The schema of `key` under these branches: every branch that declares it (a conditional's `then`
    adds properties to the same key), else an open map's value schema; None: undeclared. A branch that
    declares properties is a model, closed whatever its `additionalProperties` says (pydantic 2 writes
    `true` for extra="allow"); one that declares none is a free-form map."""
    declared = [b["properties"][key] for b in branches if key in b.get("properties", {})]
    if declared:
        return declared[0] if len(declared) == 1 else {"allOf": declared}
    for b in branches:
        extra = b.get("additionalProperties")
        if isinstance(extra, Mapping):
            return extra
        if extra is not False and not b.get("properties") and (extra is True or b.get("type") == "object"):
            return _FREE  # a free-form map (e.g. additionalInstanceConfig, runMonitoring): any key
    return None


def _keys(value: Any, path: str) -> Iterator[str]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield f"{path}.{k}"
            yield from _keys(v, f"{path}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _keys(v, f"{path}[{i}]")


def _as_list(value: Any) -> list[str]:
    return [] if value is None else [value] if isinstance(value, str) else list(value)


def _is_type(value: Any, name: str) -> bool:
    if name in ("integer", "number") and isinstance(value, bool):
        return False
    return isinstance(value, _TYPES.get(name, (object,)))


def check_values(values: Mapping[str, Any], schema: Schema) -> Report:
    report = Report()
    check(dict(values), schema, SchemaWalker(schema), "", report)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("values", type=Path)
    parser.add_argument("--schema", type=Path, required=True, help="the chart's values.schema.json")
    parser.add_argument("--chart-version", required=True, help="the chart version the schema belongs to")
    args = parser.parse_args(argv)
    try:
        schema = json.loads(args.schema.read_text())
    except (OSError, ValueError) as exc:
        print(f"{args.schema}: not a readable JSON schema: {exc}", file=sys.stderr)
        return 2
    try:
        values = yaml.safe_load(args.values.read_text())
    except (OSError, yaml.YAMLError) as exc:
        print(f"{args.values}: not a readable YAML file: {exc}", file=sys.stderr)
        return 2
    if not isinstance(values, dict):
        print(f"{args.values}: top level: expected a mapping", file=sys.stderr)
        return 2
    report = check_values(values, schema)
    for key in report.unknown:
        print(f"unknown key: {key}")
    for problem in report.wrong_type:
        print(f"wrong type: {problem}")
    print(
        f"{args.values}: {report.checked} keys checked against the dagster chart {args.chart_version} schema "
        f"({args.schema}): {len(report.unknown)} unknown, {len(report.wrong_type)} of a wrong type, "
        f"{len(report.external)} below external Kubernetes schemas (not checked)"
    )
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
