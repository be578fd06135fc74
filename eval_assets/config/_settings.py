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


class Bounds(Strict):
    """Bounds on one run (HIP-0129 §7): each is a refusal or a recorded failure with a reason."""

    run_deadline_s: Annotated[float, Field(gt=0.0, le=7 * 24 * 3600.0)] = Field(
        default=6 * 3600.0,
        description="wall-clock deadline of one materialization (subject run or one judge version's "
        "verdicts); past it no new try starts and the run is recorded as failed, settled tries kept",
    )
    max_attempts_per_run: Annotated[int, Field(ge=1, le=10_000_000)] = Field(
        default=20_000, description="scenario x repeat attempts one materialization may plan; more is refused"
    )
    max_output_bytes: Annotated[int, Field(ge=1024, le=64 * 1024 * 1024)] = Field(
        default=256 * 1024,
        description="UTF-8 bytes of one model output; a longer one is stored cut, with a marker, and never judged",
    )
    max_judge_prompt_bytes: Annotated[int, Field(ge=1024, le=64 * 1024 * 1024)] = Field(
        default=512 * 1024,
        description="UTF-8 bytes of one rendered judge prompt; a longer one is a failed verdict, no call made",
    )
    lease_ttl_s: Annotated[float, Field(ge=5.0, le=3600.0)] = Field(
        default=60.0,
        description="a run's lease on its (build, asset, partition) expires this long after its last "
        "heartbeat (a killed run's lease; on the same host a dead process's lease is taken at once)",
    )


class Settings(Strict):
    prices: dict[str, Price] = Field(
        default_factory=dict, description="prices for models litellm's own map does not know (e.g. sim/*)"
    )
    engine: Engine = Engine()
    spend: Spend = Spend()
    bounds: Bounds = Bounds()
    nightly_cron: str = Field(default="0 2 * * *", description="the nightly schedule, UTC cron")
