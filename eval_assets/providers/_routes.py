"""Which providers a model id may name: the in-process sim providers, or one litellm routes.

A leaf: litellm is imported only when a non-sim provider must be checked (it is slow to import, and
`evaltrack validate` of a sim-only project never needs it).
"""

from __future__ import annotations

import functools

from ._litellm import configured_litellm

# Providers served in-process (custom litellm providers); everything else must be a litellm provider.
LOCAL_PROVIDERS = frozenset({"sim", "simjudge", "script"})


@functools.cache
def litellm_providers() -> frozenset[str]:
    """Provider prefixes litellm can route (e.g. 'openai', 'anthropic')."""
    # litellm only when asked: the configuration (and so `evaltrack --help`) imports this module
    return frozenset(str(getattr(p, "value", p)) for p in configured_litellm().provider_list)
