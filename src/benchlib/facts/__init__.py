"""Run facts: what a run records beside its numbers and how they are read back (provenance,
saved predictions, digests of a grid's numbers)."""
