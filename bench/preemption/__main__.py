"""`python -m bench.preemption` (the code: `measuring`)."""

import sys

from bench.preemption.measuring import main

sys.exit(main())
