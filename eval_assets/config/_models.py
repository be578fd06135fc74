"""Pydantic models for every checked-in or registered configuration file. Unknown fields are errors."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator, model_validator

Id = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9._-]+$", min_length=1, max_length=120)]
"""Identifiers double as Dagster partition keys, which break on `| , [ ]` and friends."""


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# --- rubrics ---------------------------------------------------------------------------------


class IntScale(Strict):
    type: Literal["int"]
    min: int
    max: int

    @model_validator(mode="after")
    def _ordered(self) -> IntScale:
        if self.max <= self.min:
            raise ValueError(f"max ({self.max}) must be greater than min ({self.min})")
        return self


class FloatScale(Strict):
    type: Literal["float"]
    min: float
    max: float

    @model_validator(mode="after")
    def _ordered(self) -> FloatScale:
        if not self.max > self.min:
            raise ValueError(f"max ({self.max}) must be greater than min ({self.min})")
        return self


class BoolScale(Strict):
    type: Literal["bool"]


class LabelScale(Strict):
    """An ordered label set; each label maps to a value in [0, 1] used by the weighted aggregate."""

    type: Literal["labels"]
    labels: dict[Id, Annotated[float, Field(ge=0.0, le=1.0)]]

    @model_validator(mode="after")
    def _enough(self) -> LabelScale:
        if len(self.labels) < 2:
            raise ValueError("a label scale needs at least 2 labels")
        return self


Scale = Annotated[IntScale | FloatScale | BoolScale | LabelScale, Field(discriminator="type")]


class Criterion(Strict):
    name: Id
    description: str = Field(min_length=1)
    weight: Annotated[float, Field(gt=0.0)]
    scale: Scale


class Rubric(Strict):
    id: Id
    version: Annotated[int, Field(ge=1)]
    description: str = ""
    floor: Annotated[float, Field(ge=0.0, le=1.0)] = Field(
        description="A repeat whose normalised score is below this has crossed the rubric floor."
    )
    criteria: Annotated[list[Criterion], Field(min_length=1)]

    @field_validator("criteria")
    @classmethod
    def _unique_criteria(cls, criteria: list[Criterion]) -> list[Criterion]:
        names = [c.name for c in criteria]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"duplicate criterion names: {', '.join(dupes)}")
        return criteria

    @property
    def key(self) -> str:
        return f"{self.id}-v{self.version}"


# --- judges ----------------------------------------------------------------------------------


class RubricRef(Strict):
    id: Id
    version: Annotated[int, Field(ge=1)]


class Judge(Strict):
    """A judge version: model + prompt + rubric (+ decoding params and parser) as ONE unit."""

    name: Id
    version: Annotated[int, Field(ge=1)]
    status: Literal["active", "deprecated"]
    model: str = Field(
        min_length=3, description="litellm model string, e.g. simjudge/judge-a or openai/gpt-x"
    )
    family: Id = Field(description="provider family; must differ from the subject's unless exempted")
    api_base: str | None = None
    rubric: RubricRef
    prompt: str = Field(min_length=1)
    params: dict[str, Any] = Field(default_factory=dict)
    parser_version: Annotated[int, Field(ge=1)] = 1
    max_output_tokens: Annotated[int, Field(ge=1, le=32_000)] = 512
    bridges_from: Id | None = None
    bridge_builds: list[Id] = Field(default_factory=list)

    @property
    def version_id(self) -> str:
        return f"{self.name}-v{self.version}"


# --- scenarios -------------------------------------------------------------------------------


class Message(Strict):
    role: Literal["system", "user", "assistant"]
    content: str = Field(min_length=1)


class Policy(Strict):
    """Deterministic checks on a subject output; each hit is one policy failure."""

    forbidden_strings: list[str] = Field(default_factory=list)


class Scenario(Strict):
    id: Id
    suite: Id
    description: str = Field(min_length=1)
    judge: Id = Field(description="judge name; every active version of it scores this scenario")
    repeats: Annotated[int, Field(ge=2, le=100)] = 5
    input: Annotated[list[Message], Field(min_length=1)]
    policy: Policy = Policy()
    max_output_tokens: Annotated[int, Field(ge=1, le=32_000)] = 512
    family_exemption: str | None = Field(
        default=None, description="reason this scenario may be judged by the subject's own provider family"
    )
    source: Literal["authored", "trajectory"] = "authored"
    ceiling_usd: Annotated[float, Field(ge=0.0)] | None = Field(
        default=None, description="spend ceiling for this scenario per build (and per judge version); USD"
    )


# --- builds ----------------------------------------------------------------------------------


class Subject(Strict):
    model: str = Field(min_length=3)
    family: Id
    api_base: str | None = None
    system_prompt: str | None = None
    params: dict[str, Any] = Field(default_factory=dict)


class BuildManifest(Strict):
    id: Id
    milestone: Annotated[int, Field(ge=0)]
    subject: Subject
    baseline: Id | None = None
    judges: list[Id] | None = Field(
        default=None, description="judge version ids to run (default: every active version)"
    )
    description: str = ""
