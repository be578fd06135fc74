"""Checks, procedures and generators the gate tests name in their temporary registries.

Importable as `gates_fixtures.checks` because pytest puts tests/ on sys.path (rootdir conftest).
"""
