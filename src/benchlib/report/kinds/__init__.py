"""Registered report kinds: each module here registers one or more kinds on import (see
:mod:`benchlib.report.base`)."""
