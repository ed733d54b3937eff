"""The owner of a home: the background agent, its start at login, and its clients' endpoint."""
