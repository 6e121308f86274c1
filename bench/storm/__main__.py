"""`python -m bench.storm` (the code: `measuring`)."""

import sys

from bench.storm.measuring import main

sys.exit(main())
