"""Cell specs that tests write by hand: only the keys a test varies, the rest filled by the same
declarations the config fills them with (a spec ``benchlib run`` reads has every key)."""

from __future__ import annotations

from benchlib.commands.bench.cells import filled_spec

__all__ = ["filled_spec"]
