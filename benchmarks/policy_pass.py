"""The policy pass's cost per attempt, and whether it stays linear in the output's length.

    .venv/bin/python benchmarks/policy_pass.py [--runs 3] [--out benchmarks/results/policy_pass.json]

For outputs of 1 kB, 100 kB and 3 MB (mixed text: prose, JSON with escapes, URL-encoded and
base64 fragments, digits and hex, a few invisible and fullwidth characters; one forbidden string
hidden base64 inside), it times `PolicyCheck.hits` on the attempt's texts (the output, and a tool
call's arguments of the same length) as the engine runs it, and the one redaction of the same
output, each the median process CPU of `--runs`. It prints the seconds per attempt, the microseconds
per kB, and the per-byte ratio of each size to the 1 kB one (about 1 is linear; 100 is quadratic at
100 kB). The figures, the machine, its load, the commit and the command go to `--out` as JSON.
"""

from __future__ import annotations

import argparse
import base64
import json
import random
import statistics
import sys
import time
from pathlib import Path

from _results import Recording

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from eval_assets.config import Scenario  # noqa: E402
from eval_assets.judging import PolicyCheck  # noqa: E402
from eval_assets.redact import redact  # noqa: E402

SIZES = {"1 kB": 1_000, "100 kB": 100_000, "3 MB": 3_000_000}
FORBIDDEN = ["NW-OVR-2291", "FT-STAFF-90OFF", "-----BEGIN PRIVATE KEY-----"]
WORDS = (
    "the order refund policy shipping delay customer account ticket store credit within days of "
    "delivery international replacement warranty tracking number"
).split()


def mixed_text(size: int, seed: int = 7) -> str:
    """`size` characters of mixed text, the same for a seed; one forbidden string hidden in it."""
    rng = random.Random(seed)
    parts: list[str] = []
    length = 0
    while length < size:
        kind = rng.random()
        if kind < 0.80:
            piece = " ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 15))) + ". "
        elif kind < 0.85:
            piece = json.dumps({"note": rng.choice(WORDS), "id": f"NW-{rng.randint(10000, 99999)}"}) + " "
        elif kind < 0.90:
            piece = "see https://example.test/a?q=" + "%20".join(rng.sample(WORDS, 3)) + " "
        elif kind < 0.95:
            piece = base64.b64encode(" ".join(rng.sample(WORDS, 4)).encode()).decode() + " "
        elif kind < 0.98:
            piece = f"{rng.getrandbits(64):016x} {rng.randint(10**7, 10**9)} "
        else:
            piece = "ＮＷ\u200b ticket\u2066 " + rng.choice(WORDS) + " "
        parts.append(piece)
        length += len(piece)
    text = "".join(parts)[:size]
    leak = base64.b64encode(f"code {FORBIDDEN[0]}".encode()).decode()
    middle = len(text) // 2
    return text[: middle - len(leak) - 2] + f" {leak} " + text[middle:]


def cpu(fn: object, runs: int) -> float:
    assert callable(fn)
    times = []
    for _ in range(runs):
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "policy_pass.json")
    args = parser.parse_args()
    scenario = Scenario.model_validate(
        {
            "id": "bench",
            "suite": "bench",
            "description": "bench",
            "judge": "helpfulness",
            "input": [{"role": "user", "content": "hi"}],
            "policy": {"forbidden_strings": FORBIDDEN},
        }
    )
    check = PolicyCheck(scenario)
    check.hits(["warm-up: loads the confusables table once"])
    recording = Recording("policy_pass")
    rows = {}
    for name, size in SIZES.items():
        text = mixed_text(size)
        arguments = json.dumps({"q": mixed_text(size, seed=11)})
        found = check.hits([text, arguments])
        policy_s = cpu(lambda: check.hits([text, arguments]), args.runs)  # noqa: B023
        redact_s = cpu(lambda: redact(text), args.runs)  # noqa: B023
        rows[name] = {
            "chars": size,
            "found": sorted(found),
            "policy_s": policy_s,
            "policy_us_per_kb": policy_s / (2 * size) * 1e9,
            "redact_s": redact_s,
            "redact_us_per_kb": redact_s / size * 1e9,
        }
    base = rows["1 kB"]
    for row in rows.values():
        row["policy_per_byte_vs_1kB"] = row["policy_us_per_kb"] / base["policy_us_per_kb"]
        row["redact_per_byte_vs_1kB"] = row["redact_us_per_kb"] / base["redact_us_per_kb"]
    print(
        f"policy pass per attempt (an output and a tool call's arguments, each of the size); CPU median of {args.runs}"
    )
    print(
        f"{'output':>7} {'policy s':>9} {'us/kB':>8} {'per byte vs 1 kB':>17} {'redact s':>9} {'us/kB':>8} {'vs 1 kB':>8}"
    )
    for name, row in rows.items():
        print(
            f"{name:>7} {row['policy_s']:9.4f} {row['policy_us_per_kb']:8.1f} {row['policy_per_byte_vs_1kB']:17.2f}"
            f" {row['redact_s']:9.4f} {row['redact_us_per_kb']:8.1f} {row['redact_per_byte_vs_1kB']:8.2f}"
        )
    recording.figure("runs", args.runs)
    recording.table("sizes", [{"output": name, **row} for name, row in rows.items()])
    recording.write(args.out)


if __name__ == "__main__":
    main()
