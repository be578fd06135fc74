"""`python tests/agent_burst.py JOURNAL N`: N attempts of `agent_fixtures:no_retries` started at once
on the refund scenario, in a fresh process as a run has it (nothing imported ahead: litellm, the
OpenAI SDK); prints each attempt's (repeat, status, error kind, error) as JSON. tests/test_agents.py.

`burst` is also what benchmarks/endpoint_latency.py runs, against whichever checkout is first on the
path."""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
REFUND = "converted.support-728838cd92b1"


def burst(root: Path, journal: str, attempts: int, entrypoint: str) -> tuple[Any, Any, Any]:
    """The engine, build and scenario of a burst: `attempts` repeats of the refund scenario of the
    project at `root`, by the agent at `entrypoint`, under the project's engine settings (every
    attempt's calls may be in flight at once), spending into the SQLite journal at `journal`."""
    from eval_assets.config import BuildManifest, load_project
    from eval_assets.engine import Engine
    from eval_assets.providers.gateway import ModelGateway
    from eval_assets.spend import Ceilings, SpendPath, open_journal

    project = load_project(root)
    prices = {
        m: (p.input_per_mtok / 1e6, p.output_per_mtok / 1e6) for m, p in project.settings.prices.items()
    }
    spend = SpendPath(
        open_journal(f"sqlite:///{journal}"), ModelGateway(prices), run_id="r1", ceilings_for=lambda r: Ceilings()
    )
    engine = Engine(spend=spend, settings=project.settings.engine, jitter=random.Random(0))
    build = BuildManifest.model_validate(
        {
            "id": "b-agent",
            "milestone": 3,
            "subject": {
                "model": "sim/agent",
                "family": "sim",
                "params": {"skill": 1.0, "noise": 0.0, "seed": 3},
                "agent": {"entrypoint": entrypoint},
            },
        }
    )
    return engine, build, project.scenarios[REFUND].model_copy(update={"repeats": attempts})


def main(journal: str, attempts: int) -> None:
    import asyncio
    import json

    engine, build, scenario = burst(ROOT, journal, attempts, "agent_fixtures:no_retries")
    results = asyncio.run(engine.run_subjects(build, [scenario]))
    print(json.dumps([(r.repeat, r.call.status, r.call.error_kind, r.call.error) for r in results]))


if __name__ == "__main__":
    sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
    main(sys.argv[1], int(sys.argv[2]))
