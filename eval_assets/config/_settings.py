"""`evaltrack.yaml`: project-wide settings (model prices the sim and private models need)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from ._models import Strict


class Price(Strict):
    """USD per million tokens."""

    input_per_mtok: Annotated[float, Field(ge=0.0)]
    output_per_mtok: Annotated[float, Field(ge=0.0)]


class EngineSettings(Strict):
    concurrency_per_model: Annotated[int, Field(ge=1, le=4096)] = 64
    timeout_s: Annotated[float, Field(gt=0.0, le=3600.0)] = 60.0
    max_tries: Annotated[int, Field(ge=1, le=10)] = 3
    backoff_base_s: Annotated[float, Field(ge=0.0, le=60.0)] = 0.5
    backoff_max_s: Annotated[float, Field(ge=0.0, le=600.0)] = 8.0
    judge_ahead: bool = Field(
        default=True,
        description="while scenario_runs runs, judge each finished attempt at once with the build's judge "
        "versions; judge_verdicts then reuses those settled calls from the journal",
    )
    workers: Annotated[int, Field(ge=1, le=256)] | None = Field(
        default=None,
        description="processes a build's attempts run on, in blocks of whole scenarios: that many worker "
        "processes (the calling process then calls no model); default: the number of cores; 1 runs in the "
        "calling process alone",
    )
    min_attempts_per_worker: Annotated[int, Field(ge=1, le=10_000_000)] = Field(
        default=200,
        description="a worker process is started only for this many planned attempts (a smaller build "
        "runs on fewer workers, down to one in the calling process): a worker costs a process start",
    )

    def worker_count(self, attempts: int) -> int:
        """How many processes `attempts` planned attempts run on (1: the calling process alone; more:
        that many worker processes)."""
        wanted = self.workers if self.workers is not None else (os.cpu_count() or 1)
        return max(1, min(wanted, attempts // self.min_attempts_per_worker))


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


class WarehouseSettings(Strict):
    """Where the warehouse lives: the home's directory (default), or an S3-compatible bucket with its
    catalog in PostgreSQL (docs/deploy.md). Credentials come from the environment only."""

    url: str | None = Field(
        default=None,
        description="s3://bucket/prefix: the Parquet objects (credentials, region and endpoint from the "
        "AWS environment or the provider's default chain); default: $EVAL_HOME/warehouse",
    )
    catalog: str | None = Field(
        default=None,
        description="postgresql+psycopg://user@host:port/db holding the catalog tables (the spend "
        "journal's database; the password from PGPASSWORD or ~/.pgpass, never here)",
    )

    @field_validator("url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is None:
            return value
        if not re.fullmatch(r"s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/[A-Za-z0-9._/-]*)?", value):
            raise ValueError("must be s3://bucket/prefix (no credentials, no query)")
        return value.rstrip("/")

    @field_validator("catalog")
    @classmethod
    def _catalog(cls, value: str | None) -> str | None:
        if value is None:
            return value
        found = re.fullmatch(r"postgresql(\+psycopg)?://([^@/]*@)?[^/?#]+/[A-Za-z0-9_.-]+", value)
        if not found:
            raise ValueError("must be postgresql+psycopg://user@host:port/database")
        if found[2] and ":" in found[2]:
            raise ValueError("holds a password: give it in PGPASSWORD or ~/.pgpass, never in a file")
        return value

    def model_post_init(self, _context: object) -> None:
        if (self.url is None) != (self.catalog is None):
            raise ValueError("warehouse: give both url and catalog, or neither")


class Bounds(Strict):
    """Bounds on one run and on the files the project reads: each is a refusal or a
    recorded failure with a reason, never a silent truncation."""

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
    max_human_scores_bytes: Annotated[int, Field(ge=1, le=2**40)] = Field(
        default=16 * 1024 * 1024, description="largest `evaltrack scores import` file, bytes"
    )
    max_trajectory_bytes: Annotated[int, Field(ge=1, le=2**40)] = Field(
        default=16 * 1024 * 1024, description="largest `evaltrack trajectory convert` export, bytes"
    )


def provider_pool(providers: Iterable[str]) -> str:
    """The concurrency pool named for `providers`: `llm/<provider>` (several: joined with `+`, sorted)."""
    return "llm/" + "+".join(sorted(set(providers)))


class Pools(Strict):
    """Dagster concurrency pools, one per model provider: how many model-calling steps (subject runs,
    one judge version's verdicts, a bridge) of all runs may call one provider at once."""

    default_limit: Annotated[int, Field(ge=1, le=1000)] = Field(
        default=2, description="limit of a provider's pool that `limits` does not name"
    )
    limits: dict[Annotated[str, Field(pattern=r"^[a-z0-9_.-]+$")], Annotated[int, Field(ge=1, le=1000)]] = (
        Field(default_factory=dict, description="provider -> limit (e.g. {openai: 1})")
    )
    subject_provider: Annotated[str, Field(pattern=r"^[a-z0-9_.-]+$")] = Field(
        default="sim",
        description="the provider whose pool scenario_runs joins (a pool is fixed when the code location "
        "loads; builds are registered later)",
    )


class InstanceSettings(Strict):
    """Dagster's instance under $EVAL_HOME/dagster: its storage, the run queue, the provider pools."""

    storage: Literal["sqlite", "postgres"] = Field(
        default="sqlite", description="sqlite under $EVAL_HOME/dagster, or postgres (URL from `url_env`)"
    )
    url_env: Annotated[str, Field(pattern=r"^[A-Z_][A-Z0-9_]*$")] = Field(
        default="EVAL_DAGSTER_PG_URL",
        description="the environment variable holding the PostgreSQL URL (never written to a file)",
    )
    max_concurrent_runs: Annotated[int, Field(ge=1, le=1000)] = Field(
        default=4, description="runs the queued run coordinator lets run at once; the rest wait queued"
    )
    pools: Pools = Pools()

    def pool_limits(self, pools: Iterable[str]) -> dict[str, int]:
        """Limits of the `pools` (`provider_pool` names) `pools.limits` names a provider of: a pool of
        several providers takes the smallest. Pools not here keep dagster.yaml's default_limit."""
        out = {}
        for pool in set(pools):
            named = [
                self.pools.limits[p] for p in pool.removeprefix("llm/").split("+") if p in self.pools.limits
            ]
            if named:
                out[pool] = min(named)
        return out


class Review(Strict):
    """The human review queue (docs/review.md): what is routed to people, and how long a claim lasts."""

    sample_rate: Annotated[float, Field(ge=0.0, le=1.0)] = Field(
        default=0.05,
        description="share of scored attempts per build x rubric sampled for people "
        "(ceil(rate x n) of them, chosen by a seeded hash; 0: no sample)",
    )
    sample_seed: Annotated[int, Field(ge=0, le=2**63 - 1)] = Field(
        default=129, description="the named seed of the sample: same seed and verdicts, same sample"
    )
    bridge_top_n: Annotated[int, Field(ge=0, le=10_000)] = Field(
        default=10, description="largest old/new disagreements of a bridge run routed to people"
    )
    claim_ttl_s: Annotated[float, Field(ge=1.0, le=7 * 24 * 3600.0)] = Field(
        default=3600.0, description="a claim lapses this long after it was taken; the item is open again"
    )


# --- cron: checked here (the domain has no Dagster), at least as strictly as Dagster's schedule does ---
_CRON_FIELDS = (  # name, low, high, names
    ("minute", 0, 59, ()),
    ("hour", 0, 23, ()),
    ("day of month", 1, 31, ()),
    ("month", 1, 12, ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")),
    ("day of week", 0, 7, ("sun", "mon", "tue", "wed", "thu", "fri", "sat")),
)
_CRON_ITEM = re.compile(r"^(?:(\*)|([0-9a-z]+)(?:-([0-9a-z]+))?)(?:/([0-9]+))?$")


def cron_problem(expr: str) -> str | None:
    """Why `expr` is not a 5-field UTC cron expression Dagster can schedule, or None."""
    parts = expr.split()
    if len(parts) != 5:
        return f"{expr!r} is not a cron expression: expected 5 fields (minute hour day month weekday)"
    for text, (name, low, high, names) in zip(parts, _CRON_FIELDS, strict=True):
        for item in text.lower().split(","):
            m = _CRON_ITEM.match(item)
            if m is None:
                return f"{expr!r}: {name} field {text!r} is not valid cron"
            star, first, last, step = m.groups()
            if step is not None and not 1 <= int(step) <= high:
                return f"{expr!r}: {name} step {step!r} is out of range"
            for value in (first, last):
                if value is None:
                    continue
                number = names.index(value) + (low if names else 0) if value in names else None
                if number is None and not value.isdigit():
                    return f"{expr!r}: {name} value {value!r} is not valid cron"
                number = int(value) if number is None else number
                if not low <= number <= high:
                    return f"{expr!r}: {name} value {value} is outside {low}-{high}"
    day, month = parts[2], parts[3].lower()
    if month in ("2", "feb") and day in ("30", "31"):
        return f"{expr!r}: February has no day {day}"
    return None


class Redaction(Strict):
    """What the one redaction masks besides credentials (eval_assets/redact.py)."""

    pii: bool = Field(
        default=True,
        description="mask e-mail addresses, card numbers (Luhn-checked) and phone numbers in stored text and "
        "fixtures; judging and policy checks see the raw text",
    )


class AdaptiveRepeats(Strict):
    """Adaptive repeats (`repeats: adaptive`; docs/methods.md): every scenario of a build with a baseline
    starts at `start` repeats; after one look at them against the baseline, only the scenarios whose
    comparison is still uncertain are topped up to the scenario's own `repeats`."""

    start: Annotated[int, Field(ge=2, le=99)] = Field(
        default=3,
        description="repeats every scenario runs before the look; must be below every scenario's `repeats`",
    )


LOCAL_PROVIDER = "local"
"""`local/<name>`: a model served on this host by the track itself (`local_models`, docs/local-models.md)."""

RUNTIME: Literal["llama-cpp-python==0.3.36"] = "llama-cpp-python==0.3.36"
"""The one local model runtime: the server `bash scripts/setup local-model` installs (its lock's pin)."""


class LocalWeights(Strict):
    """Where a local model's weights come from: a file inside a registry package (`package` pinned
    with `==`, `member` its path in the wheel), or a file on disk (`path`)."""

    package: Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]+==[A-Za-z0-9_.+!-]+$")] | None = None
    member: Annotated[str, Field(min_length=1)] | None = None
    path: Annotated[str, Field(min_length=1)] | None = None

    @model_validator(mode="after")
    def _one_source(self) -> LocalWeights:
        if (self.package is None) == (self.path is None):
            raise ValueError("give exactly one of `package` (with `member`) or `path`")
        if (self.package is None) != (self.member is None):
            raise ValueError("`package` and `member` go together")
        return self


class LocalModel(Strict):
    """A model the track serves itself on 127.0.0.1 (`local/<name>`): its weights, pinned by SHA-256,
    and how the server runs them."""

    weights: LocalWeights
    sha256: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
    license: Annotated[str, Field(min_length=1)] = Field(description="the weights' license, e.g. Apache-2.0")
    runtime: Literal["llama-cpp-python==0.3.36"] = Field(
        default=RUNTIME, description="the server that runs the weights (the local-model lock's pin)"
    )
    context_size: Annotated[int, Field(ge=256, le=131_072)] = 2048
    parallel: Annotated[int, Field(ge=1, le=64)] = Field(
        default=1, description="calls in flight to this server at once (the engine's limit for it)"
    )
    threads: Annotated[int, Field(ge=1, le=256)] = 2
    chat_format: Annotated[str, Field(pattern=r"^[a-z0-9_.-]+$")] | None = Field(
        default=None, description="llama.cpp's chat format; default: the template inside the weights"
    )
    ready_timeout_s: Annotated[float, Field(gt=0.0, le=600.0)] = Field(
        default=60.0,
        description="the server must answer within this long after its start, else the run fails",
    )


class Settings(Strict):
    local_models: dict[Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9_.-]{0,63}$")], LocalModel] = Field(
        default_factory=dict, description="models served on this host by the track (`local/<name>`)"
    )
    local_model_cache: str | None = Field(
        default=None, description="where verified weights are kept; default $EVAL_HOME/models"
    )
    prices: dict[str, Price] = Field(
        default_factory=dict, description="prices for models litellm's own map does not know (e.g. sim/*)"
    )
    engine: EngineSettings = EngineSettings()
    spend: Spend = Spend()
    warehouse: WarehouseSettings = WarehouseSettings()
    bounds: Bounds = Bounds()
    instance: InstanceSettings = InstanceSettings()
    review: Review = Review()
    redaction: Redaction = Redaction()
    repeats: Literal["fixed", "adaptive"] = Field(
        default="fixed",
        description="fixed: every scenario runs its `repeats` (default 5); adaptive: start at "
        "`adaptive.start`, look, and top up only the scenarios whose comparison is still uncertain",
    )
    adaptive: AdaptiveRepeats = AdaptiveRepeats()
    nightly_cron: str = Field(default="0 2 * * *", description="the nightly schedule, UTC cron")
    owners: list[Annotated[str, Field(pattern=r"^(team:[A-Za-z0-9_.-]+|[^@\s]+@[^@\s]+\.[^@\s]+)$")]] = Field(
        default_factory=lambda: ["team:eval-track"],
        min_length=1,
        description="owners of every asset in the Dagster UI: `team:name` or an email address",
    )

    def price_table(self) -> dict[str, tuple[float, float]]:
        """The registered prices per token, (input, output) by model: the gateway's price table."""
        table = {m: (p.input_per_mtok / 1e6, p.output_per_mtok / 1e6) for m, p in self.prices.items()}
        # a local model is paid in compute, not money: its calls are priced 0 by declaration
        table.update({f"{LOCAL_PROVIDER}/{name}": (0.0, 0.0) for name in self.local_models})
        return table

    @field_validator("nightly_cron")
    @classmethod
    def _cron(cls, value: str) -> str:
        if (why := cron_problem(value)) is not None:
            raise ValueError(why)
        return value
