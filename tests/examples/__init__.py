"""Worked examples quoted in docs/ARCHITECTURE.md; tests/test_worked_examples.py runs them."""
