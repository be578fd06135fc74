"""Checks a project's gates may name: its scenarios and build manifests load, its converted cases are
well formed, its suite ran with no network. One module per spec area.

Each function is named by a `check:` or `procedure:` in a project's `gates/*.yaml`; the statement it
implements is in the spec document its gate's `declared_in` names. Eval-track's own invariants are
not here: they are tests of this repository (tests/invariants/).
"""
