"""`python -m bench.apiserver` (the code: `measuring`)."""

import sys

from bench.apiserver.measuring import main

sys.exit(main())
