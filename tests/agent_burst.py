"""`python tests/agent_burst.py JOURNAL N`: N attempts of `agent_fixtures:no_retries` started at once
on the refund scenario, in a fresh process as a run has it (nothing imported ahead: litellm, the
OpenAI SDK); prints each attempt's (repeat, status, error kind, error) as JSON. tests/test_agents.py."""

from __future__ import annotations

import asyncio
import json
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from eval_assets.config import BuildManifest, load_project  # noqa: E402
from eval_assets.engine import Engine  # noqa: E402
from eval_assets.providers.gateway import ModelGateway  # noqa: E402
from eval_assets.spend import Ceilings, SpendPath, open_journal  # noqa: E402


def main(journal: str, attempts: int) -> None:
    project = load_project(ROOT)
    prices = {
        m: (p.input_per_mtok / 1e6, p.output_per_mtok / 1e6) for m, p in project.settings.prices.items()
    }
    spend = SpendPath(
        open_journal(f"sqlite:///{journal}"),
        ModelGateway(prices),
        run_id="r1",
        ceilings_for=lambda r: Ceilings(),
    )
    # the project's engine settings, as a run has them: every attempt's calls may be in flight at once
    engine = Engine(spend=spend, settings=project.settings.engine, jitter=random.Random(0))
    build = BuildManifest.model_validate(
        {
            "id": "b-agent",
            "milestone": 3,
            "subject": {
                "model": "sim/agent",
                "family": "sim",
                "params": {"skill": 1.0, "noise": 0.0, "seed": 3},
                "agent": {"entrypoint": "agent_fixtures:no_retries"},
            },
        }
    )
    scenario = project.scenarios["converted.support-728838cd92b1"].model_copy(update={"repeats": attempts})
    results = asyncio.run(engine.run_subjects(build, [scenario]))
    print(json.dumps([(r.repeat, r.call.status, r.call.error_kind, r.call.error) for r in results]))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
