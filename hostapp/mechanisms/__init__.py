"""mechanisms layer."""
