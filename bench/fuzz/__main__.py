"""`python -m bench.fuzz` (the code: `measuring`)."""

import sys

from bench.fuzz.measuring import main

sys.exit(main())
