"""The one YAML reader: every YAML file the project reads goes through `read_yaml_file` / `parse_yaml`.

YAML is read as plain JSON-shaped data (mappings with unique keys, lists, strings, finite numbers,
booleans, null) and nothing else, with bounds that hold for ANY input under the size cap:

- a file over `MAX_YAML_BYTES` is refused before it is parsed;
- anchors and aliases are refused (an alias bomb of a few hundred bytes expands to gigabytes once
  anything copies, validates or dumps the shared structure); without them the parsed data is
  proportional to the text;
- nesting deeper than `MAX_YAML_DEPTH` is refused (no recursion error, no stack overflow);
- a key given twice in one mapping is refused (YAML would silently keep the last);
- `.inf`, `.nan`, lone surrogates (`"\\ud800"`), integers too long to convert, and tags other than the
  JSON-shaped ones (`!!binary`, `!!set`, `!!timestamp`, ...) are refused; an unquoted date stays text.

Every refusal is a `YamlRefused` carrying `(field, message)` pairs: the field is the dotted path of
the offending value (`subject.params.skill`) or `<yaml>`/`<file>` with a line and column.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml
from yaml.events import AliasEvent, CollectionStartEvent, ScalarEvent
from yaml.nodes import MappingNode, Node

MAX_YAML_BYTES = 1024 * 1024
"""Largest YAML file read (configs, manifests, gates, registries, corpora): 1 MiB."""
MAX_YAML_DEPTH = 64
"""Deepest nesting of mappings and lists in a YAML file."""


class YamlRefused(Exception):
    """The file is not acceptable YAML data; `issues` holds (field, message) pairs, at least one."""

    def __init__(self, issues: list[tuple[str, str]]):
        self.issues = issues
        super().__init__("; ".join(f"{f}: {m}" for f, m in issues))


class _Stop(yaml.YAMLError):
    def __init__(self, message: str, mark: Any):
        self.message = message
        self.mark = mark
        super().__init__(message)


def _at(mark: Any) -> str:
    return f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""


# libyaml's C scanner and parser when present (about 4x faster), else PyYAML's own; either way the
# composer and constructor are Python (below), so the checks are the same.
if yaml.__with_libyaml__:
    from yaml.cyaml import CParser  # type: ignore[attr-defined]

    _PARSER: tuple[type, ...] = (CParser,)
else:  # pragma: no cover - the locked PyYAML wheel ships libyaml
    _PARSER = (yaml.reader.Reader, yaml.scanner.Scanner, yaml.parser.Parser)


class _Loader(
    *_PARSER,  # type: ignore[misc]
    yaml.composer.Composer,
    yaml.constructor.SafeConstructor,
    yaml.resolver.Resolver,
):
    """Composes no alias or anchor, bounds nesting, and builds JSON-shaped data only."""

    def __init__(self, stream: str):
        if len(_PARSER) == 1:
            _PARSER[0].__init__(self, stream)  # type: ignore[misc]
        else:  # pragma: no cover
            yaml.reader.Reader.__init__(self, stream)
            yaml.scanner.Scanner.__init__(self)
            yaml.parser.Parser.__init__(self)
        yaml.composer.Composer.__init__(self)
        yaml.constructor.SafeConstructor.__init__(self)
        yaml.resolver.Resolver.__init__(self)
        self._depth = 0

    # the C parser brings its own composer; ours (below) is the one that checks
    get_single_node = yaml.composer.Composer.get_single_node
    get_node = yaml.composer.Composer.get_node
    check_node = yaml.composer.Composer.check_node
    compose_document = yaml.composer.Composer.compose_document
    compose_scalar_node = yaml.composer.Composer.compose_scalar_node
    compose_sequence_node = yaml.composer.Composer.compose_sequence_node
    compose_mapping_node = yaml.composer.Composer.compose_mapping_node

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        event = self.peek_event()
        if isinstance(event, AliasEvent):
            raise _Stop(
                f"YAML aliases (*{event.anchor}) are not allowed: write the value out", event.start_mark
            )
        if isinstance(event, ScalarEvent | CollectionStartEvent) and event.anchor is not None:
            raise _Stop(
                f"YAML anchors (&{event.anchor}) are not allowed: write the value out", event.start_mark
            )
        self._depth += 1
        try:
            if self._depth > MAX_YAML_DEPTH and isinstance(event, CollectionStartEvent):
                raise _Stop(f"nested deeper than {MAX_YAML_DEPTH} levels", event.start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                raise _Stop("YAML merge keys (<<) are not allowed: write the keys out", key_node.start_mark)
            key = self.construct_object(key_node, deep=True)
            try:
                duplicate = key in seen
                seen.add(key)
            except TypeError:
                raise _Stop("a mapping key must be text or a number", key_node.start_mark) from None
            if duplicate:
                raise _Stop(f"key {key!r} is given twice in one mapping", key_node.start_mark)
        return super().construct_mapping(node, deep=deep)


def _refuse_tag(loader: _Loader, node: Node) -> Any:
    raise _Stop(f"YAML tag {node.tag!r} is not allowed (plain data only)", node.start_mark)


for _tag in ("binary", "timestamp", "omap", "pairs", "set"):
    _Loader.add_constructor(f"tag:yaml.org,2002:{_tag}", _refuse_tag)
_Loader.add_constructor(None, _refuse_tag)  # any unknown tag (SafeLoader's own message is a traceback-ish)
# An unquoted 2026-01-05 stays the text it looks like: no implicit timestamps.
_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _walk(data: Any) -> Iterator[tuple[str, Any]]:
    """(dotted path, value) for every key and value in `data`; iterative (depth is bounded anyway)."""
    stack: list[tuple[str, Any]] = [("", data)]
    while stack:
        where, value = stack.pop()
        yield where or "<root>", value
        if isinstance(value, dict):
            for key, item in reversed(list(value.items())):
                at = f"{where}.{key}" if where else str(key)
                yield at, key
                stack.append((at, item))
        elif isinstance(value, list):
            for i in range(len(value) - 1, -1, -1):
                stack.append((f"{where}.{i}" if where else str(i), value[i]))


def data_issues(data: Any) -> list[tuple[str, str]]:
    """Values JSON-shaped data must not hold: non-finite numbers and lone surrogates, by field."""
    issues = []
    for where, value in _walk(data):
        if isinstance(value, float) and not math.isfinite(value):
            spelled = ".nan" if math.isnan(value) else ("-.inf" if value < 0 else ".inf")
            issues.append((where, f"{spelled} is not a finite number"))
        elif isinstance(value, str) and has_lone_surrogate(value):
            issues.append((where, "holds a lone surrogate (an unpaired \\ud800-\\udfff escape): not text"))
    return issues


def has_lone_surrogate(text: str) -> bool:
    """Whether `text` holds a lone surrogate (an unpaired \\ud800-\\udfff escape): not storable text."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def parse_yaml(text: str) -> Any:
    """Parse one YAML document as JSON-shaped data; raises YamlRefused (never a yaml or Python error)."""
    loader = _Loader(text)
    try:
        data = loader.get_single_data()
    except _Stop as exc:
        raise YamlRefused([("<yaml>", f"{exc.message}{_at(exc.mark)}")]) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        reason = getattr(exc, "problem", None) or str(exc)
        raise YamlRefused([("<yaml>", f"malformed YAML{_at(mark)}: {reason}")]) from None
    except (ValueError, OverflowError) as exc:  # e.g. an integer longer than Python converts
        raise YamlRefused([("<yaml>", f"a value cannot be read: {exc}")]) from None
    except RecursionError:
        raise YamlRefused([("<yaml>", f"nested deeper than {MAX_YAML_DEPTH} levels")]) from None
    finally:
        loader.dispose()
    issues = data_issues(data)
    if issues:
        raise YamlRefused(issues)
    return data


def read_capped(path: Path, max_bytes: int, what: str = "file") -> bytes:
    """The bytes of `path`, refusing (ValueError naming both sizes) a file over `max_bytes`.

    Never reads more than `max_bytes + 1` bytes, whatever the file claims. OSError passes through.
    """
    with path.open("rb") as f:
        data = f.read(max_bytes + 1)
        if len(data) > max_bytes:
            size = os.fstat(f.fileno()).st_size
            raise ValueError(f"the {what} is {max(size, len(data))} bytes, over the cap of {max_bytes} bytes")
    return data


def read_yaml_file(path: Path, max_bytes: int = MAX_YAML_BYTES) -> Any:
    """Read and parse one YAML file (UTF-8, an optional BOM); raises YamlRefused."""
    try:
        raw = read_capped(path, max_bytes)
    except OSError as exc:
        raise YamlRefused([("<file>", f"cannot read: {exc.strerror or exc}")]) from None
    except ValueError as exc:
        raise YamlRefused([("<file>", str(exc))]) from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise YamlRefused([("<file>", f"not UTF-8 text (byte {exc.start})")]) from None
    return parse_yaml(text)
