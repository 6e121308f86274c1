"""`python -m bench.simulate` (the code: `measuring`)."""

import sys

from bench.simulate.measuring import main

sys.exit(main())
