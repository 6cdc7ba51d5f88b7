"""Helpers shared by several test modules (tests/ is on pytest's ``pythonpath``); fixtures live in
tests/conftest.py."""
