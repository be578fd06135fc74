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
JUDGE_KNOBS = frozenset({"bias", "noise", "malformed_rate", "latency_ms", "seed"})
DECODING_PARAMS = frozenset({"max_tokens", "max_retries", "temperature", "tools"})


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
