"""Worked examples quoted in docs/develop/architecture.md; tests/test_worked_examples.py runs
them."""
