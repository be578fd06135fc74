"""`evaltrack build add` + `evaltrack run` beside Inspect AI's `inspect eval`: the same N scenarios x 5
repeats, a subject call and one judge call per attempt, zero latency, each through its own command line.

What each side runs (printed again at the top of the output):

- eval-track: a generated project (`throughput.generated_project`: the shipped rubrics and judges, N
  copies of the password-reset scenario, 5 repeats each, no spend ceilings), then
  `evaltrack --project P --home H build add P/bench.yaml` and `evaltrack ... run --build bench`: the
  sim provider (a litellm custom provider, in process), subject `sim/agent` and judge `helpfulness-v1`
  (`sim/judge`), zero latency, default workers (the cores), a fresh EVAL_HOME per run.
- Inspect AI: `inspect_ai==INSPECT_VERSION` installed into a throwaway venv under the temp directory
  (never a dependency of this project), a task of N samples (the same input text) x 5 epochs, solver
  `generate()` and scorer `model_graded_qa()` (the grader is the evaluated model), run as
  `inspect eval task.py --model openai/stand-in -M responses_api=false --max-connections 32
  --display none --log-dir D`: Inspect's openai provider (the openai SDK, its HTTP client, chat
  completions) against `openai_stand_in.py`, an OpenAI-compatible server this script starts on a free
  127.0.0.1 port and stops (OPENAI_BASE_URL; a placeholder key, no credential). The stand-in answers
  the subject call like the sim subject (a `[sim-quality=...]` marker) and the grader call with a
  `GRADE:` read from that marker, at zero latency; its own CPU is neither side's cost and is printed
  apart, with its count of calls (each run must make 2 x N x 5) and Inspect's accuracy from its log
  (1.0: every grade was read). `--inspect-model mockllm` runs Inspect's in-process `mockllm/model`
  instead, as before: no client and no HTTP, so cheaper than Inspect on any real model API (it counts
  tokens with tiktoken's o200k_base: Inspect's env points TIKTOKEN_CACHE_DIR at the encodings litellm
  ships, else, offline, the run ends in an error at its first sample; its grades parse as none).
  So 2 model calls per attempt on both sides.

Each side is run alternately, `--runs` times (default 3), each run a fresh process tree measured by a
small wrapper process: wall (perf_counter around the command), CPU (user + sys of the wrapper's
waited-for children, workers included: the wrapper adopts the command's orphans, `PR_SET_CHILD_SUBREAPER`,
and waits for the fork server, which outlives the command by a moment, and so for its workers;
before 2026-12-05 it did not, and eval-track's CPU figures left out its workers'), and peak RSS of
the largest process (the largest `VmHWM` of every process in the tree, sampled every 0.2 s, and the
children's ru_maxrss, whichever is larger), and the peak of each kind of process in it: the command's
own (the calling process), the fork server, the largest worker forked from it, the largest other
helper. Medians, the wall ratio and the load average are printed.
Wall includes waiting for a CPU: on a shared machine read the CPU figures and the load beside them.

With `--before DIR` (another checkout, e.g. `git worktree add /tmp/before main`), a third side runs the
same eval-track commands with DIR's package first on PYTHONPATH (this checkout's virtual environment,
as `benchmarks/demo.py` does), in the same rotation: before and after in the same window.

litellm's floor: every round also runs `litellm_floor.py` on the generated project (the same 2 x N x 5
calls through bare `litellm.acompletion`, no journal, rows or Dagster, one fresh interpreter per core,
litellm's import included), measured by the same wrapper; eval-track's wall (build add + run, and the
run alone) is printed as a multiple of the floor's median (the throughput issue's goal: <= 1.3x).

With `--evaltrack-only`, Inspect is neither installed nor run: eval-track's side (and `--before`'s)
alone, e.g. to measure its memory by process.

Run: .venv/bin/python benchmarks/inspect_side_by_side.py [--quick] [--scenarios N] [--runs R]
     [--inspect-venv DIR] (reuse a venv that has inspect_ai; default: a new one in the temp directory)
     [--inspect-model openai|mockllm] [--before DIR] [--evaltrack-only]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

from _results import Recording

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

INSPECT_VERSION = "0.3.285"
REPEATS = 5  # the generated scenarios' repeats (the password-reset template) = Inspect's epochs

INSPECT_TASK = '''
from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.scorer import model_graded_qa
from inspect_ai.solver import generate

INPUT = {input!r}
TARGET = {target!r}


@task
def side_by_side(n: int = 1000, epochs: int = 5) -> Task:
    """n samples of the password-reset input x epochs; the subject and the grader are both --model."""
    samples = [Sample(id=f"bench.s{{i:05d}}", input=INPUT, target=TARGET) for i in range(n)]
    return Task(dataset=samples, solver=generate(), scorer=model_graded_qa(), epochs=epochs)
'''


# --- the wrapper: one command, its whole process tree measured ---------------------------------


def _stat(pid: int | str) -> list[str]:
    """The fields of /proc/PID/stat after the command name (state, ppid, ..., utime at [11], stime at [12])."""
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()


def _tree(root: int) -> list[int]:
    """`root` and every process below it (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            ppid = int(_stat(entry)[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo += children.get(pid, [])
    return out


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


# what the per-process peaks are called, in the order printed
ROLES = ("calling", "fork_server", "worker", "other")


def _roles(root: int, pids: list[int]) -> dict[int, str]:
    """Each pid's role in `root`'s tree (`pids`): the command itself, multiprocessing's fork server, a
    process the fork server forked (a worker), or another helper. A child not yet past its exec (its
    command line still its parent's, and its memory figures its parent's) has no role yet."""
    lines = {pid: _cmdline(pid) for pid in pids}
    parents: dict[int, int] = {}
    for pid in pids:
        try:
            parents[pid] = int(_stat(pid)[1])
        except (OSError, IndexError, ValueError):
            continue
    roles = {root: "calling"}
    servers = {
        pid
        for pid in pids
        if pid != root
        and "multiprocessing.forkserver" in lines[pid]
        and lines[pid] != lines.get(parents.get(pid, -1))
    }
    for pid, parent in parents.items():
        if pid == root:
            continue
        if parent in servers:  # forked, not exec'd: it shares the fork server's command line
            roles[pid] = "worker"
        elif pid in servers:
            roles[pid] = "fork_server"
        elif lines[pid] != lines.get(parent):
            roles[pid] = "other"
    return roles


def _adopt_orphans() -> None:
    """Make this process the reaper of its orphaned descendants (Linux `PR_SET_CHILD_SUBREAPER`): the
    fork server outlives the command by a moment (it exits when its parent has gone), so without this
    it would be reparented away and its CPU, and its workers', never counted in this process's
    RUSAGE_CHILDREN."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(36, 1, 0, 0, 0) != 0:  # 36: PR_SET_CHILD_SUBREAPER
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER) failed")


def _reap_all() -> None:
    """Wait for every remaining descendant this process adopted, so their rusage is counted."""
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def _hwm_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def measure(cmd: list[str], env: dict[str, str], log: Path, cwd: Path) -> dict[str, float]:
    """Run `cmd` (output to `log`); its wall, CPU of the tree and the peak RSS of its largest process.
    Called in a fresh wrapper process, so the children's rusage is this command's alone."""
    peak_kb = 0
    by_role = dict.fromkeys(ROLES, 0)  # each role's largest process (kB)
    done = threading.Event()
    _adopt_orphans()
    with log.open("w") as out:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT)

        def sample() -> None:
            nonlocal peak_kb
            while not done.wait(0.2):
                pids = _tree(proc.pid)
                roles = _roles(proc.pid, pids)
                for pid in pids:
                    hwm = _hwm_kb(pid)
                    peak_kb = max(peak_kb, hwm)
                    if pid in roles:
                        by_role[roles[pid]] = max(by_role[roles[pid]], hwm)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        code = proc.wait()
        wall = time.perf_counter() - start
        done.set()
        sampler.join()
    _reap_all()  # the fork server (and so its workers' CPU), which exits once the command has
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {
        "exit": code,
        "wall_s": wall,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "user_s": usage.ru_utime,
        "peak_rss_mb": max(peak_kb, usage.ru_maxrss) / 1024,
        **{f"{role}_rss_mb": kb / 1024 for role, kb in by_role.items()},
    }


def measured(cmd: list[str], env: dict[str, str], log: Path) -> dict[str, float]:
    """`measure(cmd)` in a fresh wrapper process (its own children's rusage), run in `log`'s folder."""
    spec = {"cmd": cmd, "env": env, "log": str(log), "cwd": str(log.parent)}
    out = subprocess.run(
        [sys.executable, __file__, "--measure", json.dumps(spec)],
        capture_output=True,
        text=True,
        check=True,
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    if result["exit"] not in ok_exits(cmd):
        raise SystemExit(f"{' '.join(cmd[:4])}... exited {result['exit']}; its output: {log}")
    return result  # type: ignore[no-any-return]


def ok_exits(cmd: list[str]) -> tuple[int, ...]:
    # `evaltrack run` exits 1 for a build that may not ship (no baseline: decision none, approval
    # withheld); anything else (2 usage, 3+ internal) is a failure of the benchmark
    return (0, 1) if "run" in cmd and "evaltrack" in Path(cmd[0]).name else (0,)


# --- the HTTP stand-in Inspect's openai provider calls ------------------------------------------


class StandIn:
    """`openai_stand_in.py` in its own process on a free 127.0.0.1 port, started and stopped here; its
    CPU (from /proc) and its count of answered completions, read before and after each Inspect run."""

    def __init__(self, tmp: Path) -> None:
        port_file = tmp / "stand-in.port"
        self.proc = subprocess.Popen(
            [sys.executable, str(ROOT / "benchmarks" / "openai_stand_in.py"), str(port_file)],
            stdout=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 60
        while not port_file.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise SystemExit(f"the OpenAI stand-in did not start (exit {self.proc.returncode})")
            time.sleep(0.05)
        self.base_url = f"http://127.0.0.1:{int(port_file.read_text())}/v1"

    def cpu_s(self) -> float:
        """User + sys CPU the stand-in has used so far."""
        fields = _stat(self.proc.pid)
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def requests(self) -> int:
        """Completions answered so far."""
        with urllib.request.urlopen(self.base_url.removesuffix("/v1") + "/requests", timeout=30) as r:
            return int(json.load(r)["requests"])

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout:
            self.proc.stdout.close()


# --- the two sides ------------------------------------------------------------------------------


def inspect_venv(tmp: Path, given: str | None) -> Path:
    """A venv with inspect_ai: `given`, else a new throwaway one under `tmp` (uv from this project's venv)."""
    if given:
        venv = Path(given)
    else:
        venv = tmp / "inspect-venv"
        uv = Path(sys.executable).with_name("uv")
        installer = [str(uv), "pip", "install", "-q", "--python", str(venv / "bin/python")]
        subprocess.run([str(uv), "venv", "-q", "--python", sys.executable, str(venv)], check=True)
        subprocess.run([*installer, f"inspect_ai=={INSPECT_VERSION}", "openai"], check=True)
    if not (venv / "bin" / "inspect").is_file():
        raise SystemExit(f"{venv}: no bin/inspect (inspect_ai is not installed there)")
    return venv


READ_ACCURACY = """
import sys
from inspect_ai.log import read_eval_log
log = read_eval_log(sys.argv[1], header_only=True)
if log.status != "success" or log.results is None:
    raise SystemExit(f"inspect eval's log says {log.status}: {log.error.message if log.error else ''}")
print(log.results.scores[0].metrics["accuracy"].value)
"""


def scored(venv: Path, logs: Path) -> float:
    """The accuracy Inspect's log header records (1.0 when every grade was read as C): the check that
    the run succeeded and the grader's answers were parsed, not only made. Read with inspect_ai itself
    (the `.eval` zip is zstd-compressed), after the measured run."""
    (log,) = logs.glob("*.eval")
    out = subprocess.run(
        [str(venv / "bin/python"), "-c", READ_ACCURACY, str(log)], capture_output=True, text=True
    )
    if out.returncode != 0:
        raise SystemExit(f"{log}: {out.stderr.strip().splitlines()[-1:]}")
    return float(out.stdout.strip())


def tiktoken_files() -> Path:
    """The tiktoken encoding files litellm ships (named as tiktoken's cache names them), found without
    importing litellm."""
    spec = importlib.util.find_spec("litellm")
    if spec is None or spec.origin is None:
        raise SystemExit("litellm is not installed in this venv")
    return Path(spec.origin).parent / "litellm_core_utils" / "tokenizers"


def scenario_input() -> tuple[str, str]:
    """The password-reset scenario's user text and its rubric-free target, as Inspect's sample."""
    from eval_assets.config import load_project

    scenario = load_project(ROOT).scenarios["support.password-reset"]
    text = "\n\n".join(m.content for m in scenario.input if m.role == "user")
    return text, "a correct, safe answer to the user's request"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--measure", help=argparse.SUPPRESS)
    ap.add_argument("--quick", action="store_true", help="100 scenarios, 2 runs each (a smoke run)")
    ap.add_argument("--scenarios", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=3, help="runs of each side, alternating")
    ap.add_argument("--inspect-venv", help="a venv that already has inspect_ai (default: a new one)")
    ap.add_argument(
        "--inspect-model",
        choices=("openai", "mockllm"),
        default="openai",
        help="Inspect's model: its openai provider over HTTP to a 127.0.0.1 stand-in (default), or its "
        "in-process mockllm (no client, no HTTP)",
    )
    ap.add_argument("--connections", type=int, default=32, help="Inspect's --max-connections")
    ap.add_argument("--keep", action="store_true", help="keep the temp directory (logs) and print it")
    ap.add_argument("--before", type=Path, help="another checkout run as a third side ('before')")
    ap.add_argument(
        "--evaltrack-only",
        action="store_true",
        help="run eval-track's side (and --before's) alone, no Inspect",
    )
    args = ap.parse_args()
    if args.measure:
        spec = json.loads(args.measure)
        print(json.dumps(measure(spec["cmd"], spec["env"], Path(spec["log"]), Path(spec["cwd"]))))
        return
    n, runs = (100, 2) if args.quick else (args.scenarios, args.runs)
    tmp = Path(tempfile.mkdtemp(prefix="side-by-side-"))
    try:
        run_side_by_side(args, n, runs, tmp)
    finally:
        if args.keep:
            print(f"kept: {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def evaltrack_once(exe: str, project: Path, home: Path, env: dict[str, str]) -> dict[str, float]:
    """`build add` then `run` of the generated build on a fresh home (removed after); both measured."""
    base = [exe, "--project", str(project), "--home", str(home)]
    home.mkdir(parents=True)
    add = measured([*base, "build", "add", str(project / "bench.yaml")], env, home.with_suffix(".add.log"))
    run = measured([*base, "run", "--build", "bench"], env, home.with_suffix(".run.log"))
    shutil.rmtree(home, ignore_errors=True)
    return {
        "wall_s": add["wall_s"] + run["wall_s"],
        "cpu_s": add["cpu_s"] + run["cpu_s"],
        "peak_rss_mb": max(add["peak_rss_mb"], run["peak_rss_mb"]),
        **{k: max(add[k], run[k]) for k in (f"{role}_rss_mb" for role in ROLES)},
        "run_wall_s": run["wall_s"],
        "run_cpu_s": run["cpu_s"],
        "load": os.getloadavg()[0],
    }


def floor_once(project: Path, env: dict[str, str], log: Path) -> dict[str, float]:
    """`litellm_floor.py` on the generated project: the same calls, bare litellm, one interpreter per core."""
    cmd = [sys.executable, str(ROOT / "benchmarks" / "litellm_floor.py"), "--project", str(project)]
    return {**measured(cmd, env, log), "load": os.getloadavg()[0]}


def record(
    recording: Recording, results: dict[str, list[dict[str, float]]], med: dict[str, dict[str, float]]
) -> None:
    """Every run of every side, the medians per side and the goals, into the benchmark's results file."""
    e, f = med["evaltrack"], med["floor"]
    goals = [{"goal": "`build add` + `run` over litellm's floor", "target": "<= 1.3x",
              "measured": round(e["wall_s"] / f["wall_s"], 2), "met": e["wall_s"] / f["wall_s"] <= 1.3},
             {"goal": "peak RSS of the largest process", "target": "<= 450 MB",
              "measured": round(e["peak_rss_mb"]), "met": e["peak_rss_mb"] <= 450}]
    if "inspect" in med:
        ratio = e["wall_s"] / med["inspect"]["wall_s"]
        goals.insert(0, {"goal": "wall, eval-track over Inspect AI", "target": "<= 0.25",
                         "measured": round(ratio, 2), "met": ratio <= 0.25})
    recording.table("goals", goals)
    recording.table("medians", [{"side": side, **values} for side, values in med.items()])
    recording.table("runs", [{"side": side, "run": i + 1, **r} for side, rs in results.items() for i, r in enumerate(rs)])
    recording.write()


def print_floor(med: dict[str, dict[str, float]], sides: list[str]) -> None:
    """eval-track's wall as a multiple of litellm's floor measured in the same rotation."""
    f = med["floor"]
    print(
        f"litellm's floor (benchmarks/litellm_floor.py: the same 2 x N x 5 calls, bare litellm.acompletion, "
        f"{os.cpu_count()} interpreters): wall {f['wall_s']:.1f} s, CPU {f['cpu_s']:.1f} s (medians)"
    )
    for side in sides:
        r = med[side]
        ratio = r["wall_s"] / f["wall_s"]
        print(
            f"  {side}: build add + run {ratio:.2f}x the floor (goal <= 1.3: {'met' if ratio <= 1.3 else 'NOT met'}), "
            f"run alone {r['run_wall_s'] / f['wall_s']:.2f}x"
        )


def run_side_by_side(args: argparse.Namespace, n: int, runs: int, tmp: Path) -> None:
    import throughput

    project = tmp / "project"
    throughput.generated_project(project, n)
    exe = str(Path(sys.executable).with_name("evaltrack"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EVAL_", "DAGSTER_", "INSPECT_"))}
    if args.evaltrack_only:
        evaltrack_alone(args, n, runs, tmp, project, exe, env)
        return
    venv = inspect_venv(tmp, args.inspect_venv)
    text, target = scenario_input()
    task_file = tmp / "side_by_side_task.py"
    task_file.write_text(INSPECT_TASK.format(input=text, target=target))
    inspect_env = {
        **env,
        "XDG_DATA_HOME": str(tmp / "xdg-data"),
        "XDG_CACHE_HOME": str(tmp / "xdg-cache"),
        # tiktoken's encodings as litellm ships them (offline, no download): mockllm counts tokens with
        # o200k_base, and without them its run ends in an error at the first sample
        "TIKTOKEN_CACHE_DIR": str(tiktoken_files()),
    }
    stand_in = None
    if args.inspect_model == "openai":
        stand_in = StandIn(tmp)
        # Inspect's openai client wants a key; the stand-in reads none: a random placeholder per run,
        # never a real credential (and no key-shaped literal in a tracked file)
        placeholder = f"stand-in-{secrets.token_hex(8)}"
        inspect_env |= {"OPENAI_BASE_URL": stand_in.base_url, "OPENAI_API_KEY": placeholder}
    model = "openai/stand-in" if stand_in else "mockllm/model"
    inspect_cmd = [  # the task file relative to the working directory (Inspect refuses an absolute one)
        str(venv / "bin/inspect"), "eval", task_file.name, "--model", model,
        "--max-connections", str(args.connections), "--display", "none",
        "-T", f"n={n}", "-T", f"epochs={REPEATS}",
        # chat completions, as eval-track's calls (Inspect's openai provider would use the Responses API)
        *(["-M", "responses_api=false"] if stand_in else []),
    ]  # fmt: skip
    try:
        compare(args, n, runs, tmp, project, exe, env, inspect_env, inspect_cmd, stand_in)
    finally:
        if stand_in:
            stand_in.stop()


def compare(
    args: argparse.Namespace,
    n: int,
    runs: int,
    tmp: Path,
    project: Path,
    exe: str,
    env: dict[str, str],
    inspect_env: dict[str, str],
    inspect_cmd: list[str],
    stand_in: StandIn | None,
) -> None:
    """The alternating runs and the table of medians."""
    print(
        f"{n} scenarios x {REPEATS} repeats, subject + one judge per attempt, zero latency; {runs} runs each,"
    )
    print(f"alternating; {os.cpu_count()} cores; load at start {os.getloadavg()[0]:.1f}")
    print(f"  eval-track: {exe} --project P --home H build add P/bench.yaml; then ... run --build bench")
    print(
        f"  Inspect AI {INSPECT_VERSION}: {' '.join(Path(inspect_cmd[0]).name if i == 0 else a for i, a in enumerate(inspect_cmd))} --log-dir D"
    )
    if stand_in:
        print(
            f"  Inspect's openai provider at {stand_in.base_url} (benchmarks/openai_stand_in.py, its own process;"
            " its CPU is neither side's and is shown apart)"
        )
    recording = Recording("inspect_side_by_side")
    tracks = evaltrack_sides(args, env)
    results: dict[str, list[dict[str, float]]] = {side: [] for side in (*tracks, "floor", "inspect")}
    for i in range(runs):
        for side, side_env in tracks.items():
            results[side].append(evaltrack_once(exe, project, tmp / f"{side}-{i}", side_env))
        results["floor"].append(floor_once(project, env, tmp / f"floor-{i}.log"))
        logs = tmp / f"inspect-logs-{i}"
        served = (stand_in.cpu_s(), stand_in.requests()) if stand_in else (0.0, 0)
        ins = measured([*inspect_cmd, "--log-dir", str(logs)], inspect_env, tmp / f"inspect-{i}.log")
        if stand_in:
            calls = stand_in.requests() - served[1]
            if calls < 2 * n * REPEATS:  # a subject and a grader call per attempt, over HTTP
                raise SystemExit(f"inspect eval made {calls} calls to the stand-in, not {2 * n * REPEATS}")
            ins |= {"stand_in_cpu_s": stand_in.cpu_s() - served[0], "stand_in_calls": calls}
        ins |= {"scored": scored(Path(inspect_cmd[0]).parents[1], logs)}
        results["inspect"].append({**ins, "load": os.getloadavg()[0]})
        shutil.rmtree(logs, ignore_errors=True)
        for side in results:
            print_run(i, side, results[side][-1])
    med = {s: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for s, rs in results.items()}
    e, s = med["evaltrack"], med["inspect"]
    print_medians(med, list(tracks), s)
    print_floor(med, list(tracks))
    print(
        "| Inspect's accuracy (grades read) | " + " | ".join("" for _ in tracks) + f" | {s['scored']:.3f} |"
    )
    if "stand_in_cpu_s" in s:
        print(
            f"the stand-in (not counted on either side): {s['stand_in_cpu_s']:.1f} s of CPU for "
            f"{s['stand_in_calls']:.0f} calls per Inspect run (median)"
        )
    if "before" in med:
        b = med["before"]
        print(
            f"after / before: wall {e['wall_s'] / b['wall_s']:.2f}, CPU {e['cpu_s'] / b['cpu_s']:.2f}, "
            f"peak RSS {e['peak_rss_mb'] / b['peak_rss_mb']:.2f}"
        )
    ratio = e["wall_s"] / s["wall_s"]
    print(
        f"wall ratio evaltrack / inspect {ratio:.2f} (goal <= 0.25: {'met' if ratio <= 0.25 else 'NOT met'}); "
        f"CPU ratio {e['cpu_s'] / s['cpu_s']:.2f}; peak RSS {e['peak_rss_mb']:.0f} MB (goal <= 450: "
        f"{'met' if e['peak_rss_mb'] <= 450 else 'NOT met'}); load at end {os.getloadavg()[0]:.1f}"
    )
    record(recording, results, med)


def evaltrack_sides(args: argparse.Namespace, env: dict[str, str]) -> dict[str, dict[str, str]]:
    """eval-track's sides: this checkout, and `--before`'s with its package first on PYTHONPATH."""
    tracks = {"evaltrack": env}
    if args.before:
        before = args.before.resolve()
        if not (before / "eval_assets" / "__init__.py").is_file():
            raise SystemExit(
                f"--before {before}: no eval_assets/__init__.py (not a checkout of this project)"
            )
        tracks["before"] = {**env, "PYTHONPATH": str(before)}
        print(f"  before: the same eval-track commands with PYTHONPATH={before}")
    return tracks


def by_process(r: dict[str, float]) -> str:
    """A run's peak RSS per kind of process (the largest of each), in MB."""
    return " / ".join(f"{r[f'{role}_rss_mb']:.0f}" for role in ROLES) + " MB"


def print_medians(
    med: dict[str, dict[str, float]], sides: list[str], inspect: dict[str, float] | None = None
) -> None:
    """The table of medians: a column per eval-track side, then Inspect's when `inspect` is given."""
    head = [f"{t}: build add + run" for t in sides] + (["inspect eval"] if inspect is not None else [])
    print()
    print("| median | " + " | ".join(head) + " |")
    print("| --- | " + " | ".join("---" for _ in head) + " |")

    def row(
        label: str, ours: Callable[[dict[str, float]], str], theirs: Callable[[dict[str, float]], str]
    ) -> None:
        cells = [ours(med[t]) for t in sides] + ([theirs(inspect)] if inspect is not None else [])
        print(f"| {label} | " + " | ".join(cells) + " |")

    row(
        "wall",
        lambda r: f"{r['wall_s']:.1f} s (run alone {r['run_wall_s']:.1f} s)",
        lambda r: f"{r['wall_s']:.1f} s",
    )
    row(
        "CPU (user+sys, whole tree)",
        lambda r: f"{r['cpu_s']:.1f} s (run alone {r['run_cpu_s']:.1f} s)",
        lambda r: f"{r['cpu_s']:.1f} s",
    )
    row(
        "peak RSS, largest process",
        lambda r: f"{r['peak_rss_mb']:.0f} MB",
        lambda r: f"{r['peak_rss_mb']:.0f} MB",
    )
    row("peak RSS by process: calling / fork server / largest worker / other", by_process, by_process)


def print_run(i: int, side: str, r: dict[str, float]) -> None:
    extra = (
        f"; stand-in CPU {r['stand_in_cpu_s']:.1f} s for {r['stand_in_calls']:.0f} calls"
        if "stand_in_cpu_s" in r
        else ""
    )
    print(
        f"  run {i + 1} {side:<9} wall {r['wall_s']:6.1f} s  CPU {r['cpu_s']:6.1f} s  "
        f"peak RSS {r['peak_rss_mb']:5.0f} MB ({by_process(r)})  (load {r['load']:.1f}{extra})",
        flush=True,
    )


def evaltrack_alone(
    args: argparse.Namespace, n: int, runs: int, tmp: Path, project: Path, exe: str, env: dict[str, str]
) -> None:
    """`--evaltrack-only`: eval-track's sides alternately, no Inspect; medians per side."""
    print(
        f"{n} scenarios x {REPEATS} repeats, subject + one judge per attempt, zero latency; {runs} runs each"
    )
    print(
        f"{os.cpu_count()} cores; load at start {os.getloadavg()[0]:.1f}; Inspect not run (--evaltrack-only)"
    )
    print(f"  eval-track: {exe} --project P --home H build add P/bench.yaml; then ... run --build bench")
    recording = Recording("inspect_side_by_side_evaltrack_only")
    tracks = evaltrack_sides(args, env)
    results: dict[str, list[dict[str, float]]] = {side: [] for side in (*tracks, "floor")}
    for i in range(runs):
        for side, side_env in tracks.items():
            results[side].append(evaltrack_once(exe, project, tmp / f"{side}-{i}", side_env))
            print_run(i, side, results[side][-1])
        results["floor"].append(floor_once(project, env, tmp / f"floor-{i}.log"))
        print_run(i, "floor", results["floor"][-1])
    med = {s: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for s, rs in results.items()}
    print_medians(med, list(tracks))
    print_floor(med, list(tracks))
    e = med["evaltrack"]
    print(
        f"peak RSS {e['peak_rss_mb']:.0f} MB (goal <= 450: {'met' if e['peak_rss_mb'] <= 450 else 'NOT met'}); "
        f"load at end {os.getloadavg()[0]:.1f}"
    )
    record(recording, results, med)


if __name__ == "__main__":
    main()
