"""hostapp: a desktop host for the Model Context Protocol whose long operations survive
restarts, reboots and network loss."""

__version__ = "0.1.0"
CLIENT_NAME = "hostapp"
