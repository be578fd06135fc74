"""The project: everything checked in under the project root, validated together by `load_project`."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from ._models import Judge, Rubric, Scenario
from ._settings import Settings, WarehouseSettings, provider_pool


@dataclass(frozen=True)
class Project:
    """Everything checked in under the project root, validated together."""

    root: Path
    settings: Settings
    rubrics: dict[str, Rubric]  # key: "<id>-v<version>"
    judges: dict[str, Judge]  # key: version id "<name>-v<version>"
    scenarios: dict[str, Scenario]
    sources: dict[str, Path] = field(default_factory=dict)  # object key -> file it came from

    def for_scratch_home(self) -> Project:
        """This project with its shared stores dropped (an object-storage warehouse, a journal URL):
        what a throwaway home runs on. The home's directory warehouse and SQLite journal are the
        home's own, but a bucket or a database named in evaltrack.yaml is every home's: a scratch
        run (a gate's canary) would publish its builds' rows into the team's warehouse."""
        spend = self.settings.spend.model_copy(update={"journal_url": None})
        settings = self.settings.model_copy(update={"warehouse": WarehouseSettings(), "spend": spend})
        return dataclasses.replace(self, settings=settings)

    @property
    def active_judges(self) -> list[Judge]:
        return [j for j in sorted(self.judges.values(), key=lambda j: j.version_id) if j.status == "active"]

    def rubric_for(self, judge: Judge) -> Rubric:
        return self.rubrics[f"{judge.rubric.id}-v{judge.rubric.version}"]

    def scenarios_judged_by(self, judge: Judge) -> list[Scenario]:
        """Scenarios scored by `judge`, in id order."""
        return [s for _, s in sorted(self.scenarios.items()) if s.judge == judge.name]

    def asset_pools(self) -> dict[str, str]:
        """The Dagster concurrency pool of each model-calling asset, one pool per provider.

        A pool is fixed when the code location loads: judge assets join the pool of the provider of
        the project's judges (several providers: one pool named for all of them); scenario_runs joins
        `instance.pools.subject_provider`'s, since builds (and their subjects) are registered later.
        """
        judges = (
            provider_pool(j.model.partition("/")[0] for j in self.judges.values()) if self.judges else None
        )
        subjects = provider_pool([self.settings.instance.pools.subject_provider])
        return {
            "scenario_runs": subjects,
            "judge_verdicts": judges or subjects,
            "calibration_offsets": judges or subjects,
        }
