"""A gate check the end-to-end test injects into its project copy: it always fails.

Importable as `e2e.injected_gate` (the test puts tests/ on the PYTHONPATH of `evaltrack ui`).
"""

from __future__ import annotations

from eval_assets.gates import GateContext, GateFailed

MESSAGE = "injected by the end-to-end test: this gate always fails"


def always_fails(ctx: GateContext) -> None:
    raise GateFailed(MESSAGE)
