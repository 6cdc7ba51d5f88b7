"""Declarations: what a config may name and set, declared once, torch-free (the malfunctions,
the dataset sections' settings, the readings, the grid axes, the claims)."""
