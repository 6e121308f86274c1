import sys

from webhook.cli import main

sys.exit(main())
