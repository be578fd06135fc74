"""Model access: the litellm gateway and the in-process sim provider.

litellm is configured here, before anything imports it: offline mode (no price-map or tokenizer
downloads at import) and no debug banners.
"""

import os

os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
