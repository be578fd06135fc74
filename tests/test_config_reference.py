"""docs/reference/configuration.md is the configuration models, generated: it never drifts from them."""

from __future__ import annotations

from pathlib import Path

from eval_assets.config import BuildManifest, Judge, Rubric, Scenario, Settings, reference_markdown

REFERENCE = Path(__file__).resolve().parents[1] / "docs" / "reference" / "configuration.md"


def test_the_checked_in_reference_is_what_the_models_generate() -> None:
    assert REFERENCE.read_text(encoding="utf-8") == reference_markdown(), (
        "docs/reference/configuration.md differs from the models: run `bash scripts/config_reference`"
    )


def test_every_field_of_every_file_is_listed_with_its_type_default_and_range() -> None:
    """Each top-level field of scenarios, rubrics, judges, manifests and evaltrack.yaml has its row in its
    file's section, and the bounds the models declare are in it (a scenario's repeats 2..100, default 5;
    max_turns 1..20, default 6)."""
    text = reference_markdown()
    sections = {part.split("\n", 1)[0]: part for part in text.split("\n## ")[1:]}
    for title, model in (
        ("Scenario", Scenario),
        ("Rubric", Rubric),
        ("Judge version", Judge),
        ("Build manifest", BuildManifest),
        ("Project settings", Settings),
    ):
        names = {info.alias or name for name, info in model.model_fields.items()}
        listed = {line.split("`")[1] for line in sections[title].splitlines() if line.startswith("| `")}
        assert names <= listed, (title, names - listed)
    assert "| `repeats` | `integer` | 5 | >= 2, <= 100 |" in sections["Scenario"]
    assert "| `max_turns` | `integer` | 6 | >= 1, <= 20 |" in sections["Scenario"]
