"""`python -m bench.dashboard` (the code: `measuring`)."""

import sys

from bench.dashboard.measuring import main

sys.exit(main())
