"""`python -m bench.controller` (the code: `measuring`)."""

import sys

from bench.controller.measuring import main

sys.exit(main())
