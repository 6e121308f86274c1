"""`python -m bench.soak` (the code: `measuring`)."""

import sys

from bench.soak.measuring import main

sys.exit(main())
