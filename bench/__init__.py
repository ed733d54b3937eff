"""Benchmarks of the host: progress intake, the window under load, resume at start-up,
cold start and memory, and the journal's write cost. Run with ``python -m bench``."""
