"""transport layer."""
