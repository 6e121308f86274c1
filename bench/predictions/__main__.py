"""`python -m bench.predictions` (the code: `measuring`)."""

import sys

from bench.predictions.measuring import main

sys.exit(main())
