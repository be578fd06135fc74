"""Model access: the litellm gateway and the in-process sim provider.

litellm is imported and configured in one place, `_litellm.py`, imported first here: offline mode
(no price-map or tokenizer downloads at import) is in the environment before anything imports
litellm, and litellm itself is imported only where a model is called or a price is read. The face
names only what the configuration checks need (provider routes, sim knob names, and the model-script
shape); the gateway is `eval_assets.providers.gateway`.
"""

from ._litellm import configured_litellm  # noqa: F401  (first: offline mode in the environment)
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
