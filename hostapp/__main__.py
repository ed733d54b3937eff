"""`python -m hostapp`: the same entry point as the `hostapp` command."""

import sys

from hostapp.cli import main

sys.exit(main())
