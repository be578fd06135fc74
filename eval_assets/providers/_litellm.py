"""litellm, imported and configured in one place.

Offline mode is set in the environment when this package is imported (its face imports this module
first), so before anything here imports litellm: no price-map or tokenizer downloads at import. `configured_litellm()` imports litellm and turns off its debug banners, telemetry and verbose
logging, once per process; every module of the package that uses litellm goes through it (the
gateway and the provider routes get litellm from it; the sim providers, which subclass litellm's
classes, import litellm and call it at their own import). Nothing imports litellm at import time but
the sim providers, which only a call imports: litellm is the heaviest import of the stack, in memory
and CPU, and a process that calls no model (the calling process of a run whose blocks run in worker processes)
never pays it.
"""

from __future__ import annotations

import functools
import os
from types import ModuleType

os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


@functools.cache
def configured_litellm() -> ModuleType:
    """The litellm module, imported (once per process) and configured: no debug banners, telemetry or
    verbose logging, and no parameter dropped behind the caller's back."""
    import litellm  # the heaviest import: only where a model is called or a price is read

    litellm.suppress_debug_info = True
    litellm.telemetry = False
    litellm.drop_params = False
    litellm.set_verbose = False
    return litellm
