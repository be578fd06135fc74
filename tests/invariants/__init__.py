"""Checks of eval-track's own source, sim provider and verdict parser (tests/test_own_invariants.py).

They take a `GateContext` so they run on any root (the repository, or a copy with a planted
violation); they are ordinary tests of this repository, never gates of an evaluated build.
"""
