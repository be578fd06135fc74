"""Pydantic models for every checked-in or registered configuration file. Unknown fields are errors."""

from __future__ import annotations

import ipaddress
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator, model_validator

from eval_assets.canonical import canonical_arguments
from eval_assets.redact import SECRET_PARAM_NAME, findings

from ._assertions import parse_assertions
from ._ids import EntityId

Id = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9._-]+$", min_length=1, max_length=120)]
"""Identifiers double as Dagster partition keys, which break on `| , [ ]` and friends."""


class Strict(BaseModel):
    """Unknown fields are errors; types are strict (no `true` as an int, no "5" as a number, no 5.0
    as an int) and floats finite (no .inf, no .nan): what `validate` accepts is what runs."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


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
    """An ordered label set; each label maps to a value in [0, 1] used by the weighted aggregate.

    The order is what the judge is shown (worst to best), and a YAML mapping's order is not data:
    the values must prove it, strictly increasing in the order the labels are listed.
    """

    type: Literal["labels"]
    labels: dict[Id, Annotated[float, Field(ge=0.0, le=1.0)]]

    @model_validator(mode="after")
    def _enough(self) -> LabelScale:
        if len(self.labels) < 2:
            raise ValueError("a label scale needs at least 2 labels")
        items = list(self.labels.items())
        for (low, a), (high, b) in zip(items, items[1:], strict=False):
            if not b > a:
                raise ValueError(
                    f"labels: list the labels worst to best with strictly increasing values "
                    f"({high!r}: {b} follows {low!r}: {a}): the judge is shown them in this order"
                )
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
    judge_sees_trajectory: bool = Field(
        default=False,
        description="an agent subject's trajectory (its calls, tool calls and results) is shown to the "
        "judge inside the fence, after the output (docs/agents.md)",
    )

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


# Request arguments the track sets itself on every model request (the gateway's one litellm call):
# params naming one are refused, never passed twice or silently overridden. `max_tokens` is not here:
# among the params it is a lower cap on the scenario's (or the judge's) max_output_tokens.
TRACK_SET_PARAMS: tuple[str, ...] = ("max_retries", "num_retries", "timeout", "metadata", "model", "messages")


def _no_track_set_params(params: dict[str, Any]) -> dict[str, Any]:
    named = [name for name in TRACK_SET_PARAMS if name in params]
    if named:
        raise ValueError(
            f"{', '.join(named)}: set by the track on every request (one try per request, retried up to "
            "engine.max_tries with each try paid; the timeout is engine.timeout_s): remove it"
        )
    return params


class LocalPin(Strict):
    """What a judge on a `local/<name>` model pins of it: the weights' SHA-256 and the runtime."""

    sha256: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
    runtime: Annotated[str, Field(min_length=1)]


class Judge(Strict):
    """A judge version: model + prompt + rubric (+ decoding params and parser) as ONE unit."""

    name: EntityId
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
    parser_version: Annotated[int, Field(ge=1, le=2)] = Field(
        default=1,
        description="1: the reply ends with a <verdict>{json}</verdict> block; 2: the call asks for the "
        "rubric's JSON schema (response_format) and the whole reply is the verdict object",
    )
    max_output_tokens: Annotated[int, Field(ge=1, le=32_000)] = 512
    local_model: LocalPin | None = Field(
        default=None,
        description="a judge on a local/<name> model: the weights' SHA-256 and runtime it ran on",
    )
    bridges_from: EntityId | None = None
    bridge_builds: list[EntityId] = Field(default_factory=list)

    @property
    def version_id(self) -> str:
        return f"{self.name}-v{self.version}"

    @field_validator("params")
    @classmethod
    def _params_the_track_does_not_set(cls, params: dict[str, Any]) -> dict[str, Any]:
        return _no_track_set_params(params)


# --- scenarios -------------------------------------------------------------------------------


class Message(Strict):
    role: Literal["system", "user", "assistant"]
    content: str = Field(min_length=1)


class Policy(Strict):
    """Deterministic checks on a subject output; each hit is one policy failure."""

    forbidden_strings: list[Annotated[str, StringConstraints(min_length=1)]] = Field(default_factory=list)

    @field_validator("forbidden_strings")
    @classmethod
    def _no_blank(cls, values: list[str]) -> list[str]:
        blank = [i for i, v in enumerate(values) if not v.strip()]
        if blank:  # every answer contains "" (and nearly every one " "): each would be a policy failure
            raise ValueError(f"entries {blank} are blank: every answer would be a policy failure")
        return values


# --- trajectory replay (docs/trajectory-export.md) -------------------------------------------------
# A scenario may offer tools (OpenAI tools schema). Tool calls are never executed: each is answered from
# the scenario's replay fixture, keyed by tool name + canonical arguments; a call not in the recording
# is a replay miss. Converted scenarios (`source: trajectory`) carry these; authored ones may too.

ToolName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_-]{1,64}$")]
"""A tool (function) name as OpenAI-style providers accept it."""


class ToolFunction(Strict):
    name: ToolName
    description: str = ""
    parameters: dict[str, Any] = Field(
        default_factory=lambda: {"type": "object", "properties": {}},
        description="JSON schema of the arguments object",
    )


class Tool(Strict):
    """One tool offered to the subject, in the OpenAI tools schema litellm passes on (`tools=`)."""

    type: Literal["function"] = "function"
    function: ToolFunction


class ReplayEntry(Strict):
    """One recorded tool call: the result the tool returned when it was called with these arguments.

    `arguments` is normalised to canonical JSON text (sorted keys, compact) at load. The same
    (tool, arguments) may be recorded more than once (e.g. polling): the k-th call gets the k-th result.
    """

    tool: ToolName
    arguments: str = "{}"
    result: str

    @field_validator("arguments", mode="before")
    @classmethod
    def _canonical(cls, value: Any) -> str:
        if not isinstance(value, str | dict):
            raise ValueError("arguments: expected a JSON object or its text")
        return canonical_arguments(value)

    @property
    def key(self) -> tuple[str, str]:
        return (self.tool, self.arguments)


class Scenario(Strict):
    id: EntityId
    suite: Id
    description: str = Field(min_length=1)
    judge: EntityId = Field(description="judge name; every active version of it scores this scenario")
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
    # --- trajectory replay: tools offered, the replay fixture, the turn bound, assertions ---
    tools: list[Tool] = Field(default_factory=list, description="offered to the subject (litellm `tools=`)")
    replay: list[ReplayEntry] = Field(
        default_factory=list, description="recorded tool results; tool calls are answered, never executed"
    )
    max_turns: Annotated[int, Field(ge=1, le=20)] = Field(
        default=6, description="model calls per attempt in the replay loop (the last one must answer)"
    )
    assertions: Annotated[list[Any], Field(min_length=1)] | None = Field(
        default=None,
        description="converted cases only; written by a person, never generated (format: eval_assets.config._assertions)",
    )

    @model_validator(mode="after")
    def _replayable(self) -> Scenario:
        names = [t.function.name for t in self.tools]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"tools: duplicate tool names: {', '.join(dupes)}")
        unknown = sorted({e.tool for e in self.replay} - set(names))
        if unknown:
            raise ValueError(f"replay: tool(s) not offered in `tools`: {', '.join(unknown)}")
        if self.assertions is not None:
            if self.source != "trajectory":
                raise ValueError("assertions: only a converted scenario (source: trajectory) is a case")
            try:
                parse_assertions(self.assertions)
            except ValueError as exc:
                raise ValueError(f"assertions: {exc}") from None
        return self


# --- sim knobs (the in-process sim provider's params; checked where every other field is) -------------

Unit = Annotated[float, Field(ge=0.0, le=1.0)]


class _DecodingParams(Strict):
    """Ordinary decoding params a sim model accepts (and ignores)."""

    max_tokens: Annotated[int, Field(ge=1, le=1_000_000)] | None = None
    # the gateway sends max_retries=0 itself, so the sim provider reads it; a file naming it in its
    # params is refused before these knobs are checked (TRACK_SET_PARAMS)
    max_retries: Annotated[int, Field(ge=0, le=100)] | None = None
    temperature: Annotated[float, Field(ge=0.0, le=2.0)] | None = None
    tools: list[Any] | None = None
    tool_choice: str | dict[str, Any] | None = None


class SimSubjectKnobs(_DecodingParams):
    """`sim/*` subject knobs (eval_assets.providers.sim)."""

    skill: Unit = 0.7
    noise: Unit = 0.1
    scenario_skill: dict[EntityId, Unit] = Field(default_factory=dict)
    policy_violation_rate: Unit = 0.0
    error_rate: Unit = 0.0
    latency_ms: Annotated[float, Field(ge=0.0, le=600_000.0)] = 0.0
    seed: Annotated[int, Field(ge=0, le=2**63 - 1)] = 0


class SimJudgeKnobs(_DecodingParams):
    """`simjudge/*` judge knobs; bias and noise are in rubric points."""

    bias: Annotated[float, Field(ge=-1000.0, le=1000.0)] = 0.0
    noise: Annotated[float, Field(ge=0.0, le=1000.0)] = 0.0
    malformed_rate: Unit = 0.0
    echo_rate: Unit = 0.0  # share of replies that repeat the judge's system message
    latency_ms: Annotated[float, Field(ge=0.0, le=600_000.0)] = 0.0
    seed: Annotated[int, Field(ge=0, le=2**63 - 1)] = 0


# --- builds ----------------------------------------------------------------------------------


_USE_THE_ENVIRONMENT = (
    "a build manifest holds no credential (it is copied under EVAL_HOME/builds): "
    "set the provider's environment variable (e.g. OPENAI_API_KEY) instead"
)


ENTRYPOINT = r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*$"
"""`package.module:function`, as the track imports it (docs/agents.md)."""


def _loopback(url: str) -> bool:
    from urllib.parse import urlsplit

    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Agent(Strict):
    """An agent subject: the build's own code, run once per attempt (docs/agents.md).

    Exactly one of `entrypoint` (an async Python callable, `package.module:function`) and `http` (the
    agent's own service, POSTed the task as JSON). Its model calls go through the track's endpoint,
    which forwards them to the subject's `model`.
    """

    entrypoint: Annotated[str, StringConstraints(pattern=ENTRYPOINT, max_length=300)] | None = None
    http: Annotated[str, StringConstraints(pattern=r"^https?://[^\s]+$", max_length=2000)] | None = None
    timeout_s: Annotated[float, Field(gt=0.0, le=86_400.0)] = Field(
        default=300.0, description="one attempt's wall-clock bound; an agent still running is timed out"
    )
    allow_remote: bool = Field(
        default=False,
        description="let `http` name a host that is not loopback (it is sent the task: the scenario's "
        "input and the attempt's bearer token for the track's endpoint)",
    )

    @model_validator(mode="after")
    def _exactly_one(self) -> Agent:
        if (self.entrypoint is None) == (self.http is None):
            raise ValueError("give exactly one of `entrypoint` (package.module:function) and `http` (a URL)")
        if self.http is not None and findings(self.http):
            raise ValueError(f"http: holds {findings(self.http)[0]}: {_USE_THE_ENVIRONMENT}")
        if self.http is not None and not self.allow_remote and not _loopback(self.http):
            raise ValueError(
                f"http: {self.http} is not a loopback address (127.0.0.0/8, ::1, localhost): the task, "
                "with the scenario's input and the attempt's bearer token, would leave the host; set "
                "`allow_remote: true` to send it there"
            )
        return self

    @property
    def kind(self) -> Literal["entrypoint", "http"]:
        return "entrypoint" if self.entrypoint is not None else "http"


class Subject(Strict):
    """`model` alone: the model is the subject. With `agent`: the agent is the subject, and `model` is
    what the agent's calls through the track's endpoint are answered by (priced, ceiling-checked)."""

    model: str = Field(min_length=3)
    family: Id
    api_base: str | None = None
    system_prompt: str | None = None
    params: dict[str, Any] = Field(default_factory=dict)
    agent: Agent | None = None

    @field_validator("params")
    @classmethod
    def _params_the_track_does_not_set(cls, params: dict[str, Any]) -> dict[str, Any]:
        return _no_track_set_params(params)

    @field_validator("api_base", "system_prompt", "params")
    @classmethod
    def _no_credentials(cls, value: Any) -> Any:
        """Refuse credentials: a key-like or header-map name anywhere in `params` (`api_key`,
        `headers`, `extra_headers`, ...), or anything the redaction would remove, in any string."""
        if isinstance(value, dict):
            named = sorted(set(_credential_names(value)))
            if named:
                raise ValueError(f"{', '.join(named)}: {_USE_THE_ENVIRONMENT}")
        found = _credential_findings(value)
        if found:
            raise ValueError(f"holds {found[0]}: {_USE_THE_ENVIRONMENT}")
        return value


def _credential_names(value: Any, prefix: str = "") -> list[str]:
    """Dotted names of every key in `value` (nested maps and lists too) that names a credential or a
    header map."""
    out: list[str] = []
    if isinstance(value, dict):
        for key, inner in value.items():
            name = f"{prefix}{key}"
            if SECRET_PARAM_NAME.search(str(key)):
                out.append(name)
            out += _credential_names(inner, f"{name}.")
    elif isinstance(value, list):
        for i, inner in enumerate(value):
            out += _credential_names(inner, f"{prefix}{i}.")
    return out


def _credential_findings(value: Any) -> list[str]:
    """What the redaction would remove from any string in `value` (keys included)."""
    if isinstance(value, str):
        return findings(value)
    if isinstance(value, dict):
        return [f for k, v in value.items() for f in _credential_findings(str(k)) + _credential_findings(v)]
    if isinstance(value, list):
        return [f for v in value for f in _credential_findings(v)]
    return []


class BuildManifest(Strict):
    id: EntityId
    milestone: Annotated[int, Field(ge=0, le=2**63 - 1)]
    subject: Subject
    baseline: EntityId | None = None
    rebuild_of: EntityId | None = Field(
        default=None,
        description="this build is an unchanged rebuild of that build: its run-to-run variance widens "
        "that build's noise band when it is a baseline",
    )
    judges: list[EntityId] | None = Field(
        default=None, description="judge version ids to run (default: every active version)"
    )
    description: str = ""

    @field_validator("description")
    @classmethod
    def _no_credential_in_description(cls, value: str) -> str:
        if found := findings(value):
            raise ValueError(f"holds {found[0]}: {_USE_THE_ENVIRONMENT}")
        return value
