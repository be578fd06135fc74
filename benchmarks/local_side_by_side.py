"""`evaltrack run` beside Inspect AI's `inspect eval` on the same local model: SmolLM2-135M-Instruct
served once by the track's own llama.cpp server on 127.0.0.1, both sides calling it.

- The server: started by this script through `eval_assets.localmodel.LocalServers` (examples/local's
  declaration: its threads and slots), owned by this process for the whole benchmark; eval-track's
  commands find it through the home's state file and reuse it, Inspect's OpenAI-compatible provider
  (`openai-api/local/smollm2`) is pointed at it (its base URL and the server's per-run key, in the environment only). Its CPU is read from
  /proc before and after each side's run and printed apart: the model's work, the same for both.
- eval-track: a project copied from examples/local with N copies of `local.sum` at E repeats (subject
  `local/smollm2` at temperature 0.7, the self-hosted judge `answer-v1`), `build add` then `run` of a
  fresh build id per run (so no call is reused from the journal), each a command of its own.
- Inspect AI (`inspect_ai==INSPECT_VERSION` in a throwaway venv, never this project's dependency): N
  samples of the same input x E epochs, solver `generate()`, scorer `model_graded_qa()` whose grader
  is the same model: a subject and a grader call per attempt, as eval-track's subject and judge call.

Wall, CPU and peak RSS of each command's process tree are measured as in `inspect_side_by_side.py`;
completion tokens come from eval-track's `cost_ledger` and Inspect's log header, tokens/s is
completion tokens over wall. On a small model the server, not the harness, is the bottleneck: the
harness's own CPU beside the server's is the figure that compares the two.

Needs `bash scripts/setup local-model`. Run:
  nice .venv/bin/python benchmarks/local_side_by_side.py [--samples 10] [--epochs 3] [--runs 1]
      [--inspect-venv DIR] [--out benchmarks/results/local_side_by_side.json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import duckdb
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from _results import Recording  # noqa: E402
from inspect_side_by_side import INSPECT_VERSION, inspect_venv, measured  # noqa: E402

LOCAL = ROOT / "examples" / "local"
MODEL = "smollm2"

INSPECT_TASK = """
from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.model import GenerateConfig
from inspect_ai.scorer import model_graded_qa
from inspect_ai.solver import generate, system_message

SYSTEM = {system!r}
INPUT = {input!r}


@task
def local_side_by_side(n: int = 10, epochs: int = 3) -> Task:
    samples = [Sample(id=f"local.sum-{{i:03d}}", input=INPUT, target="42") for i in range(n)]
    return Task(
        dataset=samples,
        solver=[system_message(SYSTEM), generate()],
        scorer=model_graded_qa(),
        epochs=epochs,
        config=GenerateConfig(temperature=0.7, top_p=0.95, max_tokens={max_tokens}),
    )
"""

READ_USAGE = """
import json, sys
from inspect_ai.log import read_eval_log
log = read_eval_log(sys.argv[1], header_only=True)
usage = {m: u.output_tokens for m, u in (log.stats.model_usage or {}).items()}
print(json.dumps({"status": log.status, "error": log.error.message if log.error else None,
                  "output_tokens": sum(usage.values()),
                  "accuracy": log.results.scores[0].metrics["accuracy"].value if log.results else None}))
"""


def project_copy(dest: Path, samples: int, epochs: int) -> dict[str, object]:
    """examples/local with `samples` copies of local.sum at `epochs` repeats; returns local.sum."""
    shutil.copytree(LOCAL, dest)
    scenarios = dest / "scenarios" / "local"
    template = yaml.safe_load((scenarios / "local.sum.yaml").read_text())
    for path in scenarios.glob("*.yaml"):
        path.unlink()
    for i in range(samples):
        copy = {**template, "id": f"local.sum-{i:03d}", "repeats": epochs}
        (scenarios / f"local.sum-{i:03d}.yaml").write_text(yaml.safe_dump(copy, sort_keys=False))
    return template


def cpu_of(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def evaltrack_once(exe: str, project: Path, home: Path, build: str, env: dict[str, str]) -> dict[str, float]:
    manifest = yaml.safe_load((project / "examples/builds/baseline.yaml").read_text())
    path = project / f"{build}.yaml"
    path.write_text(yaml.safe_dump({**manifest, "id": build}, sort_keys=False))
    base = [exe, "--project", str(project), "--home", str(home)]
    add = measured([*base, "build", "add", str(path)], env, home.parent / f"{build}.add.log")
    run = measured([*base, "run", "--build", build], env, home.parent / f"{build}.run.log")
    con = duckdb.connect(str(home / "warehouse" / "warehouse.duckdb"), read_only=True)
    try:
        tokens, calls = con.execute(
            "SELECT sum(completion_tokens), count(*) FROM cost_ledger WHERE build = ? AND status = 'settled'",
            [build],
        ).fetchone() or (0, 0)
    finally:
        con.close()
    return {
        "wall_s": add["wall_s"] + run["wall_s"],
        "cpu_s": add["cpu_s"] + run["cpu_s"],
        "peak_rss_mb": max(add["peak_rss_mb"], run["peak_rss_mb"]),
        "completion_tokens": float(tokens or 0),
        "calls": float(calls or 0),
    }


def inspect_once(venv: Path, cmd: list[str], env: dict[str, str], tmp: Path, i: int) -> dict[str, float]:
    logs = tmp / f"inspect-logs-{i}"
    result = measured([*cmd, "--log-dir", str(logs)], env, tmp / f"inspect-{i}.log")
    (log,) = logs.glob("*.eval")
    read = subprocess.run(
        [str(venv / "bin/python"), "-c", READ_USAGE, str(log)], capture_output=True, text=True, check=True
    )
    usage = json.loads(read.stdout.strip().splitlines()[-1])
    if usage["status"] != "success":
        raise SystemExit(f"inspect eval's log says {usage['status']}: {usage['error']}")
    return {
        "wall_s": result["wall_s"],
        "cpu_s": result["cpu_s"],
        "peak_rss_mb": result["peak_rss_mb"],
        "completion_tokens": float(usage["output_tokens"]),
        "accuracy": float(usage["accuracy"] or 0.0),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--samples", type=int, default=10)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--runs", type=int, default=1, help="runs of each side, alternating")
    ap.add_argument("--inspect-venv", help="a venv that already has inspect_ai (default: a new one)")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "local_side_by_side.json")
    args = ap.parse_args()

    from eval_assets.config import load_project
    from eval_assets.home import EvalHome, default_home
    from eval_assets.localmodel import LocalServers, cache_dir, fetch

    recording = Recording("local_side_by_side")
    tmp = Path(tempfile.mkdtemp(prefix="local-side-by-side-"))
    servers = None
    try:
        project = tmp / "project"
        scenario = project_copy(project, args.samples, args.epochs)
        loaded = load_project(project)
        model = loaded.settings.local_models[MODEL]
        home = tmp / "home"
        cache = cache_dir(loaded.settings, EvalHome(home), project)
        cache.mkdir(parents=True)
        setup = cache_dir(loaded.settings, EvalHome(default_home()), LOCAL) / f"{model.sha256}.gguf"
        if setup.is_file():
            shutil.copyfile(setup, cache / setup.name)
        fetch(MODEL, model, cache)
        servers = LocalServers(EvalHome(home), loaded.settings, project)
        route = servers.route(MODEL)
        state = json.loads((EvalHome(home).local_model_state / f"{MODEL}.json").read_text())
        server_pid = int(state["server"]["pid"])

        venv = inspect_venv(tmp, args.inspect_venv)
        manifest = yaml.safe_load((project / "examples/builds/baseline.yaml").read_text())
        user = "\n\n".join(m["content"] for m in scenario["input"] if m["role"] == "user")  # type: ignore[index, union-attr]
        task_file = tmp / "local_task.py"
        task_file.write_text(
            INSPECT_TASK.format(
                system=manifest["subject"]["system_prompt"],
                input=user,
                max_tokens=scenario["max_output_tokens"],
            )
        )
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("EVAL_", "DAGSTER_", "INSPECT_", "OPENAI_", "LOCAL_"))
        }
        inspect_env = {
            **env,
            "XDG_DATA_HOME": str(tmp / "xdg-data"),
            "XDG_CACHE_HOME": str(tmp / "xdg-cache"),
            # Inspect's OpenAI-compatible provider, service `local` (its openai provider sends the
            # system prompt as role `developer`, which llama-cpp-python's server refuses; its
            # llama-cpp-python provider replaces any key from the environment with a placeholder)
            "LOCAL_BASE_URL": route.api_base,
            "LOCAL_API_KEY": route.api_key,
        }
        inspect_cmd = [
            str(venv / "bin/inspect"), "eval", task_file.name, "--model", f"openai-api/local/{MODEL}",
            "--display", "none", "--max-connections", "4",
            "-T", f"n={args.samples}", "-T", f"epochs={args.epochs}",
        ]  # fmt: skip
        exe = str(Path(sys.executable).with_name("evaltrack"))
        attempts = args.samples * args.epochs
        print(
            f"{args.samples} samples x {args.epochs} epochs = {attempts} attempts, a subject and a grader/judge call "
            f"each, on local/{MODEL} ({model.threads} thread(s), {model.parallel} slot(s)) at {route.api_base}; "
            f"{args.runs} run(s) each, alternating; {os.cpu_count()} cores; load {os.getloadavg()[0]:.1f}",
            flush=True,
        )
        results: dict[str, list[dict[str, float]]] = {"evaltrack": [], "inspect": []}
        for i in range(args.runs):
            before = cpu_of(server_pid)
            side = evaltrack_once(exe, project, home, f"bench-{i}", env)
            side["server_cpu_s"] = cpu_of(server_pid) - before
            results["evaltrack"].append(side | {"load": os.getloadavg()[0]})
            before = cpu_of(server_pid)
            side = inspect_once(venv, inspect_cmd, inspect_env, tmp, i)
            side["server_cpu_s"] = cpu_of(server_pid) - before
            results["inspect"].append(side | {"load": os.getloadavg()[0]})
            for name in results:
                print(
                    f"run {i} {name}: " + ", ".join(f"{k} {v:.2f}" for k, v in results[name][-1].items()),
                    flush=True,
                )
        med = {s: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for s, rs in results.items()}
        print("| side | wall s | harness CPU s | server CPU s | completion tokens | tokens/s | peak RSS MB |")
        print("|---|---|---|---|---|---|---|")
        for name, m in med.items():
            print(
                f"| {name} | {m['wall_s']:.1f} | {m['cpu_s']:.1f} | {m['server_cpu_s']:.1f} | "
                f"{m['completion_tokens']:.0f} | {m['completion_tokens'] / m['wall_s']:.1f} | {m['peak_rss_mb']:.0f} |"
            )
        recording.figure(
            "conditions",
            {
                "model": f"local/{MODEL} (SmolLM2-135M-Instruct Q4_1), llama-cpp-python 0.3.36, "
                f"{model.threads} thread(s), {model.parallel} slot(s)",
                "samples": args.samples,
                "epochs": args.epochs,
                "runs": args.runs,
                "inspect_ai": INSPECT_VERSION,
            },
        )
        recording.table(
            "medians",
            [
                {
                    "side": name,
                    "wall_s": round(m["wall_s"], 1),
                    "harness_cpu_s": round(m["cpu_s"], 1),
                    "server_cpu_s": round(m["server_cpu_s"], 1),
                    "completion_tokens": int(m["completion_tokens"]),
                    "tokens_per_s": round(m["completion_tokens"] / m["wall_s"], 2),
                    "peak_rss_mb": round(m["peak_rss_mb"]),
                }
                for name, m in med.items()
            ],
        )
        for name, rows in results.items():
            recording.table(f"runs_{name}", rows)
        recording.write(args.out)
    finally:
        if servers is not None:
            servers.stop_all()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
