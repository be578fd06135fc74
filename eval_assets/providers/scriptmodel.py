"""Model scripts: an authored list of turns a `script/NAME` model plays back. Pure: pydantic, no litellm.

A script file (`gates/fixtures/models/NAME.yaml`, read by the one YAML reader in `eval_assets.config`)
holds one script:

```yaml
turns:
  - error: InternalServerError        # a failure turn: the provider fails this try
    message: "503 upstream overloaded"
    reply: "The refund policy is"     # optional: the reply it had begun ...
    break_at: 12                      # ... and the byte offset at which it broke off
  - text: "Refunds are accepted within 30 days."        # a text reply
  - tool_calls:                                          # tool calls, OpenAI `tool_calls` shape
      - id: call_lookup_1                                # authored: kept exactly
        type: function
        function: {name: lookup_order, arguments: '{"order_id": "A-1"}'}
```

Which turn answers a call (`select_turn`) is derived from the request alone, so it is the same on
every retry, in every process: the turns are grouped into *steps*, each step being the failure turns
before a reply and that reply (failure turns after the last reply form a last step with no reply).
The step is the number of assistant messages after the conversation's last user message (the model's
own turns in this exchange; assistant turns quoted in a scenario's input do not count); within the
step, try number k plays the step's k-th turn. So a retry after a failure turn gets the next turn, a new
conversation (every judge call, every attempt's first turn) starts at step 0, and a reused journal
try never shifts what a later try sees. A call past the last step, or a try past its step's turns,
is an exhausted script: an explicit error, never a silent stop.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Discriminator, Field, StringConstraints, Tag, model_validator

SCRIPT_PROVIDER = "script"

# The litellm exception classes a failure turn may raise: the ones the gateway tells apart (retryable or
# not). Names, so that a script file holds plain data; the provider maps them to litellm's classes.
ScriptError = Literal[
    "RateLimitError",
    "InternalServerError",
    "ServiceUnavailableError",
    "APIConnectionError",
    "Timeout",
    "BadRequestError",
    "AuthenticationError",
    "NotFoundError",
    "ContextWindowExceededError",
    "ContentPolicyViolationError",
]
SCRIPT_ERRORS: tuple[str, ...] = get_args(ScriptError)
CallId = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.:-]{1,64}$")]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class ScriptFunction(_Strict):
    name: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_-]{1,64}$")]
    arguments: str = Field(description="the call's arguments, a JSON object as text (as providers send it)")


class ScriptToolCall(_Strict):
    """One tool call, in the OpenAI `tool_calls` shape; `id` is authored and played back exactly."""

    id: CallId
    type: Literal["function"] = "function"
    function: ScriptFunction


class TextTurn(_Strict):
    text: str


class ToolCallsTurn(_Strict):
    tool_calls: Annotated[list[ScriptToolCall], Field(min_length=1)]
    text: str | None = None

    @model_validator(mode="after")
    def _distinct_ids(self) -> ToolCallsTurn:
        ids = [c.id for c in self.tool_calls]
        if len(set(ids)) != len(ids):
            raise ValueError(f"call ids repeat within one turn: {ids}")
        return self


class FailureTurn(_Strict):
    """The provider fails this try with `error`; `reply`/`break_at`: the reply broke off at that byte."""

    error: ScriptError
    message: str = "scripted provider failure"
    reply: str | None = None
    break_at: Annotated[int, Field(ge=0)] | None = None

    @model_validator(mode="after")
    def _offset_in_reply(self) -> FailureTurn:
        if (self.reply is None) != (self.break_at is None):
            raise ValueError("reply and break_at go together (the reply, and the byte it broke off at)")
        if self.reply is not None and self.break_at is not None:
            size = len(self.reply.encode("utf-8"))
            if self.break_at > size:
                raise ValueError(f"break_at {self.break_at} is past the reply's {size} bytes")
        return self

    def partial(self) -> str:
        """The bytes of the reply that arrived before the break (whole characters)."""
        if self.reply is None or self.break_at is None:
            return ""
        return self.reply.encode("utf-8")[: self.break_at].decode("utf-8", "ignore")


def _turn_kind(value: Any) -> str | None:
    by_type: dict[type, str] = {TextTurn: "text", ToolCallsTurn: "tool_calls", FailureTurn: "error"}
    if type(value) in by_type:  # serializing a validated turn
        return by_type[type(value)]
    if not isinstance(value, dict):
        return None
    kinds = [k for k in ("error", "tool_calls") if k in value]
    if len(kinds) == 1:
        return kinds[0]
    return "text" if not kinds and "text" in value else None


Turn = Annotated[
    Annotated[TextTurn, Tag("text")]
    | Annotated[ToolCallsTurn, Tag("tool_calls")]
    | Annotated[FailureTurn, Tag("error")],
    Discriminator(
        _turn_kind,
        custom_error_type="turn_kind",
        custom_error_message="a turn is exactly one of: a text reply (text), tool calls (tool_calls), a failure (error)",
    ),
]


class ModelScript(_Strict):
    """One authored script: its turns, in order (at least one)."""

    description: str = ""
    turns: Annotated[list[Turn], Field(min_length=1)]

    def steps(self) -> list[list[Turn]]:
        """The turns grouped into steps: failure turns, then the reply that ends the step."""
        out: list[list[Turn]] = [[]]
        for turn in self.turns:
            out[-1].append(turn)
            if not isinstance(turn, FailureTurn):
                out.append([])
        return out if out[-1] else out[:-1]


class NoScriptTurn(Exception):
    """A call the script has no turn for: an explicit error, never a silent stop."""


def assistant_turns(messages: Sequence[Any]) -> int:
    """How many assistant messages follow the conversation's last user message (the script step to
    play): the model's own turns in this exchange, not the assistant turns quoted in the input."""
    count = 0
    for message in messages:
        role = message.get("role") if isinstance(message, dict) else getattr(message, "role", None)
        if role == "user":
            count = 0
        elif role == "assistant":
            count += 1
    return count


def select_turn(script: ModelScript, name: str, messages: Sequence[Any], try_no: int) -> Turn:
    """The turn that answers this call (see the module doc). Raises NoScriptTurn."""
    steps = script.steps()
    step = assistant_turns(messages)
    if step >= len(steps):
        raise NoScriptTurn(
            f"script {name!r} is exhausted: the conversation holds {step} assistant turn(s) after its last "
            f"user message and the script has {len(steps)} step(s)"
        )
    turns = steps[step]
    if try_no < 1 or try_no > len(turns):
        raise NoScriptTurn(
            f"script {name!r} is exhausted: step {step} has {len(turns)} turn(s) and this is try {try_no}"
        )
    return turns[try_no - 1]
