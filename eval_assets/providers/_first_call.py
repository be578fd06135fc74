"""What litellm imports lazily at its first call, imported ahead: the fork server imports this module
(`gateway.CALL_MODULES`) so each worker forked from it starts with them loaded.

Measured with `python -X importtime` around the first sim call of a fresh process (litellm 1.110.2):
that call imported 65 modules in 0.22 s, 0.2 s of it these two (its token encoding, 0.12 s; the
proxy's types, which a files-endpoint helper pulls in, 0.08 s); a worker's first call then takes
0.05 s instead of 0.24 s, and the import is paid once, in the fork server, beside the calling process's
own start. tests/test_contract_model_gateway.py checks that a first call after this import loads neither.
"""

from __future__ import annotations

from eval_assets.providers._litellm import configured_litellm

configured_litellm()  # offline and quiet before any of litellm is imported

import litellm.litellm_core_utils.default_encoding  # noqa: E402, F401  (tiktoken's encoding, 0.12 s)
import litellm.proxy.openai_files_endpoints.common_utils  # noqa: E402, F401  (the proxy types, 0.08 s)
