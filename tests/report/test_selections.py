"""Selection evidence computed from a hand-made metrics dict."""

from __future__ import annotations

from benchlib.report.selections import selection_shares


def test_selection_shares_count_benign_clients_only_after_round_zero():
    metrics = {
        "malicious_clients": [0],
        "history": {
            "selections": [
                [[1, 2, 3], [0, 2, 3], [0, 1, 3], [0, 1, 2]],  # round 0: ignored
                [[1], [2, 3], [1], [0, 1, 2]],  # round 1
                [[], [2], [1, 3], [1]],  # round 2
            ]
        },
    }
    shares = selection_shares(metrics)
    # benign clients 1, 2, 3: per round 1 possible malfunctioning and 2 possible benign peers
    assert shares["rounds"] == 2
    assert (shares["malicious_selected"], shares["malicious_possible"]) == (1, 6)
    assert (shares["benign_selected"], shares["benign_possible"]) == (9, 12)
    assert shares["benign_share"] == 9 / 12
