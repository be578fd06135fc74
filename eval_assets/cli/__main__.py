"""`python -m eval_assets.cli`: the same as `evaltrack`."""

import sys

from eval_assets.cli import main

sys.exit(main())
