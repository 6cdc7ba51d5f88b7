"""``local``: no collaboration; every client trains alone (the reference row of every table)."""

from __future__ import annotations

from benchlib.methods.base import P2PMethod, P2PResult, PeerView


class LocalOnly(P2PMethod):
    description = "each client trains on its own data only"

    def aggregate_client(self, view: PeerView) -> P2PResult:
        own = view.own
        return P2PResult(vector=own, selected=[])
