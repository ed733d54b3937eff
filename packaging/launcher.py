"""Entry point of the bundled application: the same commands as the ``hostapp`` script.

Without arguments it opens the window; ``hostapp lab serve --stdio`` (how the window
starts its built-in lab server from a bundle) and the other sub-commands work as usual.
"""

import sys

from hostapp.cli import main

if __name__ == "__main__":
    sys.exit(main())
