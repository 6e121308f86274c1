"""`python -m bench.peers` (the code: `measuring`)."""

import sys

from bench.peers.measuring import main

sys.exit(main())
