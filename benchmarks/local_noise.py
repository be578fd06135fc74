"""Real noise, measured: unchanged rebuilds of the SmolLM2 baseline (examples/local) through `evaltrack
run`, on the real model as subject and as self-hosted judge, at their normal temperatures.

A fresh EVAL_HOME under a temporary directory: the weights copied from the setup's cache (verified), the
baseline registered and run, then `--rebuilds` builds identical to it but for their id (each with
`baseline: smollm2-baseline`, no `rebuild_of`: the strict A/A, no rebuild widening the noise band), each
registered and run as `evaltrack --project examples/local run --build aa-N --format json`, one at a time.
Prints, and writes to `--out` (JSON): the decisions (allow / investigate = flag / block), the A/A block
and flag rates with Wilson 95% intervals beside the 5% block budget, and the local judge's verdicts
(scored / failed, with the failure reasons counted) over every build run. The load average is recorded
beside them: on a shared machine the wall time is not the model's speed.

Every rebuild is compared with the SAME baseline run, so the measured pairs share one draw of the
baseline: they measure the block rate given that baseline, which no test bounds (the budget is a rate
over both builds' noise). Two readings of the same scores separate the statistics from that design:
- a run effect, per scenario: does a build's mean differ between runs more than its repeats explain
  (a permutation test of the between-build variance of the means)? The rules assume repeats
  independent within a run; a run effect would make them block unchanged builds;
- the A/A rates through the project's own rules (`eval_assets.stats.evaluate`, the vectorised path the
  calibration benchmark cross-checks against `compare`) over `--resamples` pairs of builds whose repeats
  are drawn from each scenario's measured scores (all runs pooled): independent baselines (the rate
  the budget is about), and the measured baseline held fixed (the rate this benchmark's design reads;
  its spread over drawn baselines is printed as quantiles).

Needs `bash scripts/setup local-model`. Run: nice -n 19 .venv/bin/python benchmarks/local_noise.py
[--rebuilds 20] [--out benchmarks/results/local_noise.json]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import duckdb
import yaml
from _results import Recording

ROOT = Path(__file__).resolve().parents[1]
LOCAL = ROOT / "examples" / "local"
BUDGET = 0.05


def wilson(k: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    if n == 0:
        return (0.0, 1.0)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def evaltrack(project: Path, home: Path, *args: str) -> tuple[int, str]:
    from eval_assets.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["--project", str(project), "--home", str(home), *args])
    return code, out.getvalue() + err.getvalue()


# examples/local's three scenarios and these two: a comparison needs MIN_SCENARIOS (5) scenarios, and
# with fewer every A/A pair reads `investigate` (insufficient evidence) whatever the noise
EXTRA = {
    "local.opposite": "What is the opposite of the word 'hot'? Answer with one word.",
    "local.days": "How many days are there in a week? Reply with the number.",
}


def project_copy(dest: Path, repeats: int) -> Path:
    """examples/local copied to `dest` with EXTRA's scenarios added and every scenario's `repeats` set
    (enough verdicts to read the local judge's parse-failure rate from one benchmark run)."""
    from eval_assets.stats import MIN_SCENARIOS

    shutil.copytree(LOCAL, dest)
    folder = dest / "scenarios" / "local"
    template = yaml.safe_load((folder / "local.capital.yaml").read_text())
    for sid, text in EXTRA.items():
        extra = {
            **template,
            "id": sid,
            "description": "A one-fact question.",
            "input": [{"role": "user", "content": text}],
        }
        (folder / f"{sid}.yaml").write_text(yaml.safe_dump(extra, sort_keys=False))
    paths = sorted((dest / "scenarios").rglob("*.yaml"))
    assert len(paths) >= MIN_SCENARIOS, paths
    for path in paths:
        scenario = yaml.safe_load(path.read_text())
        scenario["repeats"] = repeats
        path.write_text(yaml.safe_dump(scenario, sort_keys=False))
    return dest


def aa_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The A/A table docs/methods.md renders: each rate with its Wilson 95% interval beside its budget."""

    def interval(ci: tuple[float, float]) -> str:
        return f"[{ci[0]:.3f}, {ci[1]:.3f}]"

    n, verdicts = result["rebuilds"], result["local_judge_verdicts"]
    counts = result["decisions"]
    return [
        {"measure": "A/A block (unchanged rebuild blocked)", "count": f"{counts.get('block', 0)} / {n}",
         "rate": result["block_rate"], "wilson_95": interval(result["block_ci95"]), "budget": "<= 0.05"},
        {"measure": "A/A flag (investigate)", "count": f"{counts.get('investigate', 0)} / {n}",
         "rate": result["flag_rate"], "wilson_95": interval(result["flag_ci95"]), "budget": ""},
        {"measure": "local judge verdicts that failed to parse", "count": f"{result['local_judge_parse_failures']} / {verdicts}",
         "rate": result["local_judge_parse_failure_rate"], "wilson_95": interval(result["local_judge_parse_failure_ci95"]), "budget": ""},
    ]  # fmt: skip


def run_effect(scores: list[tuple[str, str, list[float]]], draws: int, seed: int) -> list[dict[str, Any]]:
    """Per scenario: the variance of its build means against the same statistic over `draws` random
    reassignments of all its repeats to builds of the same sizes (one-sided permutation p)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    out = []
    for sid in sorted({s for s, _, _ in scores}):
        groups = [np.asarray(v, dtype=float) for s, _, v in scores if s == sid]
        pooled = np.concatenate(groups)
        cuts = np.cumsum([len(g) for g in groups])[:-1]
        observed = np.var([g.mean() for g in groups])
        perms = np.stack([rng.permutation(pooled) for _ in range(draws)])
        means = np.stack([part.mean(axis=1) for part in np.split(perms, cuts, axis=1)], axis=1)
        p = (1 + np.sum(means.var(axis=1) >= observed - 1e-12)) / (draws + 1)
        out.append({"scenario": sid, "builds": len(groups), "repeats": len(pooled),
                    "mean": round(float(pooled.mean()), 3), "run_effect_p": round(float(p), 3)})  # fmt: skip
    return out


def resampled_aa(
    scores: list[tuple[str, str, list[float]]],
    baseline: str,
    floor: float | None,
    repeats: int,
    pairs: int,
    seed: int,
) -> dict[str, Any]:
    """The A/A block and flag rates through `evaluate` over `pairs` builds drawn from each scenario's
    measured scores (every run pooled): against independently drawn baselines, and against the
    measured baseline held fixed; and the block rate given a baseline, over 200 drawn baselines."""
    import numpy as np

    from eval_assets.stats import Budget, Moments, evaluate

    rng = np.random.default_rng(seed)
    sids = sorted({s for s, _, _ in scores})
    pools = [np.concatenate([v for s, _, v in scores if s == sid]) for sid in sids]
    measured = np.stack(
        [np.asarray(next(v for s, b, v in scores if s == sid and b == baseline)) for sid in sids]
    )

    def draw(n: int) -> Any:
        return np.stack([rng.choice(pool, size=(n, repeats)) for pool in pools], axis=1)

    def rates(base: Any, cand: Any) -> tuple[float, float]:
        outcome = evaluate(Moments.of(base, floor), Moments.of(cand, floor), floor, Budget())
        return float(outcome.block.mean()), float(outcome.flag.mean())

    independent = rates(draw(pairs), draw(pairs))
    fixed = rates(np.broadcast_to(measured, (pairs, *measured.shape)), draw(pairs))
    given = [rates(np.broadcast_to(b, (pairs // 100, *b.shape)), draw(pairs // 100))[0] for b in draw(200)]

    def se(p: float) -> float:
        return math.sqrt(p * (1 - p) / pairs)

    return {
        "pairs": pairs,
        "independent_block": independent[0], "independent_block_se": se(independent[0]),
        "independent_flag": independent[1], "independent_flag_se": se(independent[1]),
        "fixed_block": fixed[0], "fixed_block_se": se(fixed[0]),
        "fixed_flag": fixed[1], "fixed_flag_se": se(fixed[1]),
        "given_baseline_block_quantiles": {q: float(np.quantile(given, q)) for q in (0.1, 0.5, 0.9, 0.99)},
    }  # fmt: skip


def resampled_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The resampled A/A table docs/methods.md renders."""
    r = result["resampled"]

    def pct(p: float, se: float) -> str:
        return f"{100 * p:.1f} ± {100 * se:.1f}"

    return [
        {"baselines": "drawn independently (the budget's rate)", "pairs": r["pairs"],
         "block_pct": pct(r["independent_block"], r["independent_block_se"]),
         "flag_pct": pct(r["independent_flag"], r["independent_flag_se"]), "budget": "block <= 5"},
        {"baselines": "the measured baseline, held fixed (this benchmark's design)", "pairs": r["pairs"],
         "block_pct": pct(r["fixed_block"], r["fixed_block_se"]),
         "flag_pct": pct(r["fixed_flag"], r["fixed_flag_se"]), "budget": ""},
    ]  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rebuilds", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=5, help="each scenario's repeats (5 scenarios)")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "local_noise.json")
    parser.add_argument(
        "--resamples", type=int, default=20_000, help="A/A pairs drawn from the measured scores"
    )
    args = parser.parse_args()

    from eval_assets.config import load_project
    from eval_assets.home import EvalHome, default_home
    from eval_assets.localmodel import cache_dir, fetch

    recording = Recording("local_noise")
    started = time.perf_counter()
    loads = [os.getloadavg()[0]]
    decisions: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory(prefix="local-noise-") as tmp:
        root = project_copy(Path(tmp) / "project", args.repeats)
        project = load_project(root)
        model = project.settings.local_models["smollm2"]
        home = Path(tmp) / "home"
        cache = cache_dir(project.settings, EvalHome(home), project.root)
        cache.mkdir(parents=True)
        setup = (
            cache_dir(project.settings, EvalHome(default_home()), project.root) / f"{model.sha256}.gguf"
        )
        if setup.is_file():
            shutil.copyfile(setup, cache / setup.name)
        fetch("smollm2", model, cache)
        base = yaml.safe_load((root / "examples/builds/baseline.yaml").read_text())
        manifests = Path(tmp) / "builds"
        manifests.mkdir()
        code, out = evaltrack(root, home, "build", "add", str(root / "examples/builds/baseline.yaml"))
        assert code == 0, out
        code, out = evaltrack(root, home, "run", "--build", "smollm2-baseline", "--format", "json")
        assert code == 0, out
        for i in range(1, args.rebuilds + 1):
            manifest = {**base, "id": f"aa-{i}", "baseline": "smollm2-baseline", "description": "unchanged"}
            path = manifests / f"aa-{i}.yaml"
            path.write_text(yaml.safe_dump(manifest, sort_keys=False))
            code, out = evaltrack(root, home, "build", "add", str(path))
            assert code == 0, out
            t0 = time.perf_counter()
            code, out = evaltrack(root, home, "run", "--build", f"aa-{i}", "--format", "json")
            record = json.loads(out.strip().splitlines()[-1])["builds"][0]
            decisions.append(
                {
                    "build": f"aa-{i}",
                    "decision": record["decision"],
                    "reasons": [r for r in record.get("reasons", []) if r.get("severity") != "info"],
                    "wall_s": time.perf_counter() - t0,
                }
            )
            loads.append(os.getloadavg()[0])
            print(
                f"aa-{i}: {record['decision']} ({decisions[-1]['wall_s']:.0f} s, load {loads[-1]:.1f})",
                flush=True,
            )
        con = duckdb.connect(str(home / "warehouse" / "warehouse.duckdb"), read_only=True)
        verdicts = con.execute(
            "SELECT status, coalesce(failure_reason, '') FROM judge_verdicts WHERE judge_version = 'answer-v1'"
        ).fetchall()
        attempts = con.execute(
            "SELECT count(*), avg(latency_s), sum(completion_tokens) FROM scenario_runs"
        ).fetchone()
        scores = con.execute(
            "SELECT scenario_id, build, list(score ORDER BY repeat) FROM judge_verdicts "
            "WHERE judge_version = 'answer-v1' AND status = 'scored' GROUP BY ALL ORDER BY ALL"
        ).fetchall()
        con.close()
        floor = project.rubric_for(project.judges["answer-v1"]).floor
    n = len(decisions)
    counts = Counter(str(d["decision"]) for d in decisions)
    failed = [reason for status, reason in verdicts if status != "scored"]
    result = {
        "benchmark": "local_noise",
        "conditions": {
            "model": f"local/smollm2 (SmolLM2-135M-Instruct Q4_1), llama-cpp-python 0.3.36, "
            f"{model.threads} thread(s), {model.parallel} slot(s)",
            "subject_params": base["subject"]["params"],
            "judges": ["answer-v1 (local judge, parser 2)"],
            "scenarios": 3 + len(EXTRA),
            "repeats": args.repeats,
            "rebuild_design": "baseline: smollm2-baseline, no rebuild_of",
            "load_average_1m": {"min": min(loads), "max": max(loads)},
            "wall_s": time.perf_counter() - started,
            "cpus": os.cpu_count(),
        },
        "rebuilds": n,
        "attempts": attempts[0] if attempts else 0,
        "mean_subject_latency_s": attempts[1] if attempts else None,
        "decisions": dict(counts),
        "block_rate": counts["block"] / n if n else None,
        "block_ci95": wilson(counts["block"], n),
        "flag_rate": counts["investigate"] / n if n else None,
        "flag_ci95": wilson(counts["investigate"], n),
        "block_budget": BUDGET,
        "local_judge_verdicts": len(verdicts),
        "local_judge_parse_failures": len(failed),
        "local_judge_parse_failure_rate": len(failed) / len(verdicts) if verdicts else None,
        "local_judge_parse_failure_ci95": wilson(len(failed), len(verdicts)),
        "local_judge_failure_reasons": dict(Counter(r.split(":")[0] for r in failed)),
        "per_build": decisions,
        "run_effect": run_effect(scores, 5000, seed=1),
        "resampled": resampled_aa(scores, "smollm2-baseline", floor, args.repeats, args.resamples, seed=2),
    }
    per_build = result.pop("per_build")
    effects = result.pop("run_effect")
    for key, value in result.items():
        recording.figure(key, value)
    recording.table("per_build", per_build)  # type: ignore[arg-type]
    recording.table("aa", aa_rows(result))
    recording.table("run_effect", effects)  # type: ignore[arg-type]
    recording.table("resampled", resampled_rows(result))
    recording.write(args.out)
    lo, hi = result["block_ci95"]
    flo, fhi = result["flag_ci95"]
    print(f"rebuilds {n}, attempts {result['attempts']}")
    print(f"A/A block {counts['block']}/{n} [{lo:.2f}, {hi:.2f}] (budget <= {BUDGET:.0%})")
    print(f"A/A flag  {counts['investigate']}/{n} [{flo:.2f}, {fhi:.2f}]")
    print(f"local judge parse failures {len(failed)}/{len(verdicts)}")
    for row in effects:
        print(f"run effect {row['scenario']}: p {row['run_effect_p']} over {row['builds']} builds")
    for row in resampled_rows(result):
        print(
            f"resampled A/A, baselines {row['baselines']}: block {row['block_pct']}%, flag {row['flag_pct']}%"
        )
    quantiles = result["resampled"]["given_baseline_block_quantiles"]
    print(
        "block rate given a drawn baseline, quantiles: "
        + ", ".join(f"{q}: {v:.3f}" for q, v in quantiles.items())
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
