"""Starts the hostapp window on its built-in lab server (the design card's entry point)."""

import sys

from hostapp.app import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
