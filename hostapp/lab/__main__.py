"""``python -m hostapp.lab serve ...``: run the lab server."""

import sys

from hostapp.lab.server import main

sys.exit(main())
