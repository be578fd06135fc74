"""The docs check: each spec's "Hard gates" section against the registry, by ids and counts.

A spec document (`docs/specs/*.md`) declares its gates in a section whose heading is "Hard gates"
(any level, case-insensitive, optionally numbered: "## 5. Hard gates"), one list item per gate, the
gate id in backticks first on the item:

```markdown
## Hard gates

- `arch.domain-never-imports-dagster` — the domain package never imports Dagster.
```

For every document that declares gates or is named by a gate's `declared_in.document`, the ids in
its section must equal the ids of the registry gates that name it, with no id listed twice. The
check compares identifiers and counts, never meanings; it also checks that each gate's
`declared_in.heading` is a heading of its document, so the link back resolves.
"""

from __future__ import annotations

import re
from pathlib import Path

from eval_assets.config import Problem

from ._registry import Registry, read_registry

SPECS_GLOB = "docs/specs/*.md"
SECTION = "Hard gates"
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_ITEM_ID = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+`([^`]+)`")
_SECTION_RE = re.compile(r"^(?:[\d.]+\s+)?hard gates$", re.IGNORECASE)


def _headings_and_ids(text: str) -> tuple[list[str], list[str] | None]:
    """(every heading's text, the ids listed under "Hard gates" or None if there is no such section)."""
    headings: list[str] = []
    ids: list[str] | None = None
    section_level: int | None = None
    fenced = False
    for line in text.splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
            continue
        if fenced:
            continue
        heading = _HEADING.match(line)
        if heading:
            level, title = len(heading.group(1)), heading.group(2).strip()
            headings.append(title)
            if section_level is not None and level <= section_level:
                section_level = None
            if _SECTION_RE.match(title):
                section_level = level
                ids = ids if ids is not None else []
            continue
        if section_level is not None and ids is not None:
            item = _ITEM_ID.match(line)
            if item:
                ids.append(item.group(1).strip())
    return headings, ids


def _fmt(ids: list[str] | set[str]) -> str:
    return ", ".join(f"`{i}`" for i in sorted(ids))


def check_docs(root: Path, registry: Registry | None = None) -> list[Problem]:
    """Compare each spec document's declared gate ids with the registry; one problem per mismatch.

    Problems name the document (path relative to `root`), the field `Hard gates` (or the heading
    that does not resolve) and the ids involved: declared but not registered for this document,
    registered for it but not declared, declared twice, a count mismatch, a missing document or
    section. Only valid registry gates are compared (`read_registry` reports the invalid ones).
    """
    root = root.resolve()
    registry = registry or read_registry(root, check_imports=False)
    by_doc: dict[str, list[str]] = {}
    headings_wanted: dict[str, list[tuple[str, str]]] = {}
    doc_of: dict[str, str] = {}
    for gate in registry.gates:
        doc = gate.declared_in.document
        by_doc.setdefault(doc, []).append(gate.id)
        headings_wanted.setdefault(doc, []).append((gate.id, gate.declared_in.heading))
        doc_of[gate.id] = doc
    documents = sorted({str(p.relative_to(root)) for p in root.glob(SPECS_GLOB)} | set(by_doc))
    problems: list[Problem] = []
    for doc in documents:
        registered = by_doc.get(doc, [])
        path = root / doc
        if not path.is_file():
            problems.append(
                Problem(doc, "<file>", f"named by declared_in of {_fmt(registered)}, but it does not exist")
            )
            continue
        headings, declared = _headings_and_ids(path.read_text(encoding="utf-8"))
        for gate_id, heading in headings_wanted.get(doc, []):
            if heading not in headings:
                problems.append(
                    Problem(
                        doc, f"heading {heading!r}", f"`{gate_id}` links to a heading this document lacks"
                    )
                )
        if declared is None:
            if registered:
                problems.append(
                    Problem(
                        doc,
                        SECTION,
                        f"no '{SECTION}' section, but the registry has {len(registered)} gate(s) "
                        f"for this document: {_fmt(registered)}",
                    )
                )
            continue
        unregistered = sorted(set(declared) - set(registered))
        if unregistered:
            elsewhere = [f"`{i}` is registered under {doc_of[i]}" for i in unregistered if i in doc_of]
            note = f" ({'; '.join(elsewhere)})" if elsewhere else ""
            problems.append(
                Problem(
                    doc,
                    SECTION,
                    f"declared here but not in the registry for this document: {_fmt(unregistered)}{note}",
                )
            )
        undeclared = sorted(set(registered) - set(declared))
        if undeclared:
            problems.append(
                Problem(doc, SECTION, f"in the registry but not declared here: {_fmt(undeclared)}")
            )
        twice = sorted({i for i in declared if declared.count(i) > 1})
        if twice:
            problems.append(Problem(doc, SECTION, f"declared more than once: {_fmt(twice)}"))
        if len(declared) != len(registered):
            problems.append(
                Problem(
                    doc,
                    SECTION,
                    f"declares {len(declared)} gate(s); the registry has {len(registered)} for this document",
                )
            )
    return problems


def validate_gates(root: Path) -> list[Problem]:
    """Everything `evaltrack validate` reports for gates/: registry problems, then docs problems."""
    registry = read_registry(root)
    return [*registry.problems, *check_docs(root, registry)]
