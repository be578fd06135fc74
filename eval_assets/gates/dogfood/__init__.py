"""This project's own gates and tests (the dogfood registry under `gates/`), one module per spec area.

Each function is named by a `check:`, `procedure:`, `generator:` or `predicate:` in `gates/*.yaml`;
the statement it implements is in the spec document its gate's `declared_in` names.
"""
