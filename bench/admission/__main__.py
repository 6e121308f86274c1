"""`python -m bench.admission` (the code: `measuring`)."""

import sys

from bench.admission.measuring import main

sys.exit(main())
