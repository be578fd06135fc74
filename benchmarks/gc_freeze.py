"""What freezing the command's heap saves: a full collection of an `evaltrack` command's heap, frozen
(as the command leaves it) against unfrozen, side by side in one fresh interpreter per round.

    .venv/bin/python benchmarks/gc_freeze.py [--rounds 5]

Each round runs `evaltrack --project <checkout> validate` as the command (`main()` with `sys.argv`),
then times `gc.collect()` over the heap the command left frozen, unfreezes it and times `gc.collect()`
again: the second is the collection the interpreter's exit (or a worker's first block) would pay
without the freeze. The freeze is `cli.common.collector_paused` and `cli.main`'s return; the worker
processes freeze what the fork server imported the same way. Prints the medians and their ratio.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _results import Recording

ROOT = Path(__file__).resolve().parents[1]

_ROUND = """
import gc, json, sys, time
from eval_assets.cli import main
sys.argv = ["evaltrack", "--project", sys.argv[1], "validate"]
code = main()
frozen = gc.get_freeze_count()
start = time.perf_counter(); gc.collect(); with_freeze = time.perf_counter() - start
gc.unfreeze()
start = time.perf_counter(); gc.collect(); without = time.perf_counter() - start
print(json.dumps({"exit": code, "frozen_objects": frozen, "with_freeze_s": with_freeze, "without_s": without}))
"""


def one_round(home: Path) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", _ROUND, str(ROOT)],
        cwd=home,
        env={"PYTHONPATH": str(ROOT), "EVAL_HOME": str(home / "home"), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["exit"] == 0, done.stderr[-2000:]
    return result


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    recording = Recording("gc_freeze")
    with tempfile.TemporaryDirectory(prefix="gc-freeze-") as tmp:
        rounds = [one_round(Path(tmp)) for _ in range(args.rounds)]
    frozen = statistics.median(r["with_freeze_s"] for r in rounds)
    unfrozen = statistics.median(r["without_s"] for r in rounds)
    objects = int(statistics.median(r["frozen_objects"] for r in rounds))
    row = {
        "command": "evaltrack validate",
        "frozen_objects": objects,
        "full_collection_frozen_ms": round(1000 * frozen, 2),
        "full_collection_unfrozen_ms": round(1000 * unfrozen, 2),
        "unfrozen_over_frozen": round(unfrozen / frozen, 1) if frozen > 0 else None,
        "rounds": args.rounds,
    }
    recording.table("collection", [row])
    recording.write(args.out)
    print(
        f"{row['command']}: {objects} objects frozen; a full collection {row['full_collection_frozen_ms']} ms "
        f"frozen, {row['full_collection_unfrozen_ms']} ms unfrozen (x{row['unfrozen_over_frozen']}), "
        f"medians of {args.rounds} rounds"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
