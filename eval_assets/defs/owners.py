"""Owners of every asset: evaltrack.yaml's `owners` (default `team:eval-track`)."""

from eval_assets.defs.project import PROJECT

OWNERS = list(PROJECT.settings.owners)
