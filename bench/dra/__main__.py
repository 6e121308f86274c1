"""`python -m bench.dra` (the code: `measuring`)."""

import sys

from bench.dra.measuring import main

sys.exit(main())
