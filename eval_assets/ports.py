"""The ports of eval-track and their implementations: the one list.

A port is a boundary the domain talks through with more than one implementation behind it (or one
today and more expected). Each port has exactly one contract module under `tests/`,
`tests/test_contract_<port>.py`, whose tests run on every implementation listed here; the test
command fails when a port has no contract module or an implementation is not registered against its
port's contract (`tests/test_ports.py`). Adding an implementation here without covering it in the
contract module fails that check; docs/design.md ("Ports and their contract suites") states the rule.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Port:
    """A port: its name (the contract module's suffix), the face the domain calls, and the names of
    its implementations (the contract module's `IMPLEMENTATIONS`)."""

    name: str
    face: str
    implementations: tuple[str, ...]

    @property
    def contract_module(self) -> str:
        """The path of its contract module, relative to the repository root."""
        return f"tests/test_contract_{self.name}.py"


PORTS: tuple[Port, ...] = (
    Port(
        "model_gateway",
        "eval_assets.providers.gateway.ModelGateway",
        # the sim providers, authored model scripts, and litellm's OpenAI path to any compatible server
        ("sim", "script", "openai"),
    ),
    Port(
        "agent_protocol",
        "eval_assets.engine (subject.agent: the attempt's task, the track's endpoint, the result)",
        ("entrypoint", "http"),
    ),
    Port("spend_journal", "eval_assets.spend.SpendJournal", ("sqlite", "postgres")),
    Port(
        "warehouse_storage",
        "eval_assets.warehouse.Warehouse",
        # the home's directory, and an S3-compatible bucket with its catalog in PostgreSQL
        ("local", "object"),
    ),
)


def port(name: str) -> Port:
    """The port named `name`. Raises KeyError naming the known ports."""
    for candidate in PORTS:
        if candidate.name == name:
            return candidate
    raise KeyError(f"no port {name!r}; the ports are {', '.join(p.name for p in PORTS)}")
