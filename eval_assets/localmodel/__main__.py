"""`python -m eval_assets.localmodel fetch [--project DIR] [--home DIR]`: put every declared local
model's weights into the cache, verified by SHA-256 (what `bash scripts/setup local-model` runs). With
no `--home`, each project's cache is in the home its commands use (`default_home(project)`), so
`evaltrack --project DIR ...` finds what setup fetched."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from eval_assets.config import ConfigError, load_project
from eval_assets.home import EvalHome, default_home, project_root

from ._server import runtime_problem
from ._weights import LocalModelError, cache_dir, fetch


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m eval_assets.localmodel")
    parser.add_argument("action", choices=["fetch"])
    parser.add_argument(
        "--project", type=Path, action="append", help="a project (repeatable; default: this one)"
    )
    parser.add_argument("--home", type=Path, default=None, help="one home for every project")
    args = parser.parse_args(argv)
    for root in args.project or [project_root()]:
        home = EvalHome(args.home if args.home is not None else default_home(root.resolve()))
        try:
            project = load_project(root)
        except ConfigError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        cache = cache_dir(project.settings, home, project.root)
        for name, model in sorted(project.settings.local_models.items()):
            try:
                fetch(name, model, cache)
            except LocalModelError as exc:
                print(f"error: {exc}", file=sys.stderr)
                return 1
            if (why := runtime_problem(model)) is not None:
                print(f"error: local model {name!r}: {why}", file=sys.stderr)
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
