"""Report kinds any config may use, and the paper-vs-ours comparison of all three papers."""
