"""What litellm imports lazily at its first call, imported ahead: the fork server imports this module
(`gateway.CALL_MODULES`) so each worker forked from it starts with them loaded.

These two are most of what litellm's first call imports (`python -X importtime` around the first sim
call of a fresh process): its token encoding, and the proxy's types, which a files-endpoint helper
pulls in. Imported here, they are paid once, in the fork server, beside the calling process's own start,
instead of at every worker's first call. tests/test_contract_model_gateway.py checks that a first call
after this import loads neither.
"""

from __future__ import annotations

from eval_assets.providers._litellm import configured_litellm

configured_litellm()  # offline and quiet before any of litellm is imported

import litellm.litellm_core_utils.default_encoding  # noqa: E402, F401  (tiktoken's encoding)
import litellm.proxy.openai_files_endpoints.common_utils  # noqa: E402, F401  (the proxy types)
