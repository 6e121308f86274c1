"""`python -m bench.autoscaling` (the code: `measuring`)."""

import sys

from bench.autoscaling.measuring import main

sys.exit(main())
