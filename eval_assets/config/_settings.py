"""`evaltrack.yaml`: project-wide settings (model prices the sim and private models need)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from ._models import Strict


class Price(Strict):
    """USD per million tokens."""

    input_per_mtok: Annotated[float, Field(ge=0.0)]
    output_per_mtok: Annotated[float, Field(ge=0.0)]


class Engine(Strict):
    concurrency_per_model: Annotated[int, Field(ge=1, le=4096)] = 64
    timeout_s: Annotated[float, Field(gt=0.0, le=3600.0)] = 60.0
    max_tries: Annotated[int, Field(ge=1, le=10)] = 3
    backoff_base_s: Annotated[float, Field(ge=0.0, le=60.0)] = 0.5
    backoff_max_s: Annotated[float, Field(ge=0.0, le=600.0)] = 8.0


class Spend(Strict):
    """Spend ceilings in USD (None: no ceiling; 0: nothing runs) and where the journal lives."""

    scenario_ceiling_usd: Annotated[float, Field(ge=0.0)] | None = Field(
        default=None, description="default per-scenario ceiling; a scenario file's ceiling_usd overrides it"
    )
    suite_ceiling_usd: Annotated[float, Field(ge=0.0)] | None = None
    day_ceiling_usd: Annotated[float, Field(ge=0.0)] | None = None
    journal_url: str | None = Field(
        default=None, description="SQLAlchemy URL; default sqlite:///$EVAL_HOME/journal.sqlite"
    )


class Settings(Strict):
    prices: dict[str, Price] = Field(
        default_factory=dict, description="prices for models litellm's own map does not know (e.g. sim/*)"
    )
    engine: Engine = Engine()
    spend: Spend = Spend()
    nightly_cron: str = Field(default="0 2 * * *", description="the nightly schedule, UTC cron")
    owners: list[Annotated[str, Field(pattern=r"^(team:[A-Za-z0-9_.-]+|[^@\s]+@[^@\s]+\.[^@\s]+)$")]] = Field(
        default_factory=lambda: ["team:eval-track"],
        min_length=1,
        description="owners of every asset in the Dagster UI: `team:name` or an email address",
    )
