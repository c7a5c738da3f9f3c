"""User experience, measured: the user's mistakes made on purpose (mistakes, clear, probe) and what a
user writes and calls for the same job (footprint)."""
