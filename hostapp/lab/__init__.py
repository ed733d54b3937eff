"""lab layer."""
