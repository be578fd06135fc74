"""The sim provider's model of the world: pure, deterministic functions, no litellm.

A sim subject has a latent quality per (seed, build, scenario, repeat); a sim judge reads that
quality back from the subject output and maps it onto the rubric scale with its own bias and noise.
Statistical tests draw from these functions directly, so they test the same model the demo runs.
"""

from __future__ import annotations

import hashlib
import math
import random

QUALITY_MARKER = "[sim-quality="
POLICY_VIOLATION_TEXT = "-----BEGIN PRIVATE KEY-----"
SUBJECT_KNOBS = frozenset(
    {"skill", "noise", "scenario_skill", "policy_violation_rate", "error_rate", "latency_ms", "seed"}
)
JUDGE_KNOBS = frozenset({"bias", "noise", "malformed_rate", "echo_rate", "latency_ms", "seed"})
# `tool_choice`: the replay loop sends "none" on an attempt's last turn, which must answer.
DECODING_PARAMS = frozenset({"max_tokens", "max_retries", "temperature", "tools", "tool_choice"})


def rng_for(*parts: object) -> random.Random:
    """A `random.Random` seeded from a stable hash of `parts` (never Python's salted `hash`)."""
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def subject_quality(
    *, seed: int, build: str, scenario_id: str, repeat: int, skill: float, noise: float
) -> float:
    """Latent quality in [0, 1] of one attempt: skill plus Gaussian noise, clipped.

    The same (seed, build, scenario, repeat, skill, noise) always gives the same value.
    The build id is part of the stream so two builds with the same seed are independent draws.
    """
    rng = rng_for("quality", seed, build, scenario_id, repeat)
    return min(1.0, max(0.0, skill + noise * rng.gauss(0.0, 1.0)))


def subject_event(*, seed: int, build: str, scenario_id: str, repeat: int, kind: str, rate: float) -> bool:
    """Whether an event of `kind` (error, policy violation, ...) happens on this attempt."""
    if rate <= 0:
        return False
    return rng_for(kind, seed, build, scenario_id, repeat).random() < rate


def judge_value(
    *,
    quality: float,
    low: float,
    high: float,
    bias: float,
    noise: float,
    rng: random.Random,
    integer: bool,
) -> float:
    """A judge's score for one bounded criterion: quality mapped onto [low, high] plus bias and noise.

    Bias and noise are in rubric points. The result is clipped to the scale (a real judge answers
    in range too; out-of-range answers are the parser's business, exercised by `malformed_rate`).
    """
    value = low + quality * (high - low) + bias + (noise * rng.gauss(0.0, 1.0) if noise > 0 else 0.0)
    value = min(high, max(low, value))
    return float(math.floor(value + 0.5)) if integer else value


# --- tools: the sim subject as an agent that calls recorded tools --------------------------

WRONG_CALL_PENALTY = 0.1
"""Latent quality lost per tool call the recording did not hold (the agent worked from an error)."""
UNANSWERED_PENALTY = 0.2
"""Latent quality lost per recorded call the agent never made (it answered without that result)."""


def calls_right_tool(
    *, seed: int, build: str, scenario_id: str, repeat: int, turn: int, skill: float
) -> bool:
    """Whether the agent makes the recorded call on this turn (probability `skill`, clipped to [0, 1]).

    Deterministic per (seed, build, scenario, repeat, turn); independent of the quality draw.
    """
    rng = rng_for("tool", seed, build, scenario_id, repeat, turn)
    return rng.random() < min(1.0, max(0.0, skill))


def wrong_arguments(arguments: dict[str, object], *, turn: int) -> dict[str, object]:
    """Arguments an agent plausibly gets wrong: the first string value mangled, else an extra key.

    Never equal to `arguments`, so the call is not in the recording (a replay miss).
    """
    for key in sorted(arguments):
        value = arguments[key]
        if isinstance(value, str):
            return {**arguments, key: f"{value}-{turn}x"}
    return {**arguments, "page": 1000 + turn}


def tool_answer_quality(quality: float, *, wrong_calls: int, unanswered: int) -> float:
    """The final answer's latent quality after the tool phase: penalised per wrong call and per
    recorded call never made, clipped to [0, 1]. With no tools involved it is `quality` unchanged."""
    return min(1.0, max(0.0, quality - WRONG_CALL_PENALTY * wrong_calls - UNANSWERED_PENALTY * unanswered))
