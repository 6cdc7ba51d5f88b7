"""Where the tests find the repository, the goldens and the real data samples beside it."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
GOLDEN = REPO / "tests" / "golden"
SHARED_DATA = (REPO / ".." / "shared" / "data").resolve()
