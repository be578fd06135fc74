"""litellm's own floor for the side-by-side run: the same model calls as `evaltrack run` makes on the
generated project (N scenarios x 5 repeats, a subject call then a judge call on its output per attempt),
made with bare `litellm.acompletion` and nothing else: no journal, no limiter, no rows, no Dagster.

`python benchmarks/litellm_floor.py --scenarios N [--procs P]` starts P fresh interpreters (default:
the cores), each importing litellm and the sim provider (the gateway's `ready`: the provider and the
prices registered, as the engine's first call does), then making the attempts i, i + P, ... of its share,
256 in flight per model (the generated project's `concurrency_per_model`); it exits when every part has
and litellm's logging of its calls is drained. The calls are built with the engine's own spec builders
and the one prompt renderer (`subject_spec`, `judge_spec`, the fence nonce), so both sides send the same
requests and the sim provider draws the same replies.

So the floor's wall is what the calls themselves cost on this machine, interpreter starts and litellm's
import included: `inspect_side_by_side.py` runs it in its rotation and prints eval-track's wall as a
multiple of it (the throughput issue's "within 1.3x of litellm's floor").
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _results import Recording

ROOT = Path(__file__).resolve().parents[1]
CONCURRENCY = 256  # the generated project's engine.concurrency_per_model (throughput.generated_project)
TIMEOUT_S = 30.0
FENCE = b"litellm floor: fence secret"


async def bare_completion(spec: Any, limits: dict[str, asyncio.Semaphore], concurrency: int) -> Any:
    """One bare `litellm.acompletion` of `spec` (the gateway's request, one try, `gateway.litellm_completion`),
    at most `concurrency` in flight per model (`limits`: the caller's semaphore per model). The floor's
    calls and `throughput.py`'s bare side both go through this."""
    from eval_assets.providers.gateway import litellm_completion

    async with limits.setdefault(spec.model, asyncio.Semaphore(concurrency)):
        return await litellm_completion(spec, {**spec.metadata, "try_no": 1})


def part(project_dir: Path, build_file: Path, index: int, parts: int) -> int:
    """This interpreter's share of the attempts: subject, then judge on the subject's text. Returns the
    number of calls made."""
    sys.path.insert(0, str(ROOT))
    from eval_assets.capability.builds import judges_for
    from eval_assets.config import Scenario, load_build, load_project
    from eval_assets.engine import judge_spec, subject_spec
    from eval_assets.fence import fence_nonce
    from eval_assets.providers.gateway import CallSpec, ModelGateway
    from eval_assets.spend import AttemptRef

    project = load_project(project_dir)
    build = load_build(build_file, project)
    (judge,) = judges_for(project, build)
    rubric = project.rubric_for(judge)
    attempts = [
        (scenario, repeat)
        for scenario in project.scenarios_judged_by(judge)
        for repeat in range(1, scenario.repeats + 1)
    ][index::parts]
    ModelGateway(project.settings.price_table()).ready()  # litellm, the sim provider and the prices
    from litellm.litellm_core_utils.logging_worker import GLOBAL_LOGGING_WORKER

    calls = 0

    async def main() -> None:
        limits: dict[str, asyncio.Semaphore] = {}

        async def call(spec: CallSpec) -> str:
            nonlocal calls
            reply = await bare_completion(spec, limits, CONCURRENCY)
            calls += 1
            return str(reply.choices[0].message.content)

        async def attempt(scenario: Scenario, repeat: int) -> None:
            subject = subject_spec(
                build.subject, scenario, build=build.id, repeat=repeat, timeout_s=TIMEOUT_S
            )
            text = await call(subject)
            nonce = fence_nonce(
                FENCE, AttemptRef(build.id, scenario.id, repeat, "judge", judge.version_id).fence_id
            )
            await call(
                judge_spec(
                    judge,
                    rubric,
                    scenario,
                    text,
                    nonce=nonce,
                    build=build.id,
                    repeat=repeat,
                    timeout_s=TIMEOUT_S,
                )
            )

        await asyncio.gather(*(attempt(s, r) for s, r in attempts))
        await GLOBAL_LOGGING_WORKER.flush()

    asyncio.run(main())
    return calls


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--project", type=Path, required=True, help="the generated project (its bench.yaml)")
    ap.add_argument("--procs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--part", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    build_file = args.project / "bench.yaml"
    if args.part is not None:
        print(part(args.project, build_file, args.part, args.procs), flush=True)
        return
    recording = Recording("litellm_floor")
    started = time.perf_counter()
    env = {**os.environ, "LITELLM_OFFLINE_MODE": "true"}
    cmd = [sys.executable, __file__, "--project", str(args.project), "--procs", str(args.procs)]
    procs = [
        subprocess.Popen([*cmd, "--part", str(i)], env=env, stdout=subprocess.PIPE, text=True)
        for i in range(args.procs)
    ]
    outs = [p.communicate()[0] for p in procs]
    if any(p.returncode for p in procs):
        raise SystemExit(f"a floor part failed: exits {[p.returncode for p in procs]}")
    calls = sum(int(o.strip().splitlines()[-1]) for o in outs)
    print(f"calls {calls}")
    recording.figure("calls", calls)
    recording.figure("processes", args.procs)
    recording.figure("wall_s", round(time.perf_counter() - started, 2))
    recording.write()


if __name__ == "__main__":
    main()
