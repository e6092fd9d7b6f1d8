"""`python -m kiln.cli …`: the `kiln` command without its console script (tests, `kiln lab`, molecule run it so)."""

import sys

from kiln.cli import main

sys.exit(main())
