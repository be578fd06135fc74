"""Model access: the litellm gateway and the in-process sim provider.

litellm is configured here, before anything imports it: offline mode (no price-map or tokenizer
downloads at import) and no debug banners. The face names only what the configuration checks need
(provider routes, sim knob names, and the model-script shape); the gateway is `eval_assets.providers.gateway`.
"""

import os

os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from ._routes import LOCAL_PROVIDERS, litellm_providers  # noqa: E402
from .scriptmodel import (  # noqa: E402
    SCRIPT_ERRORS,
    SCRIPT_PROVIDER,
    FailureTurn,
    ModelScript,
    NoScriptTurn,
    ScriptToolCall,
    TextTurn,
    ToolCallsTurn,
    select_turn,
)
from .simmodel import DECODING_PARAMS, JUDGE_KNOBS, SUBJECT_KNOBS  # noqa: E402

__all__ = [
    "DECODING_PARAMS",
    "JUDGE_KNOBS",
    "LOCAL_PROVIDERS",
    "SCRIPT_ERRORS",
    "SCRIPT_PROVIDER",
    "SUBJECT_KNOBS",
    "FailureTurn",
    "ModelScript",
    "NoScriptTurn",
    "ScriptToolCall",
    "TextTurn",
    "ToolCallsTurn",
    "litellm_providers",
    "select_turn",
]
