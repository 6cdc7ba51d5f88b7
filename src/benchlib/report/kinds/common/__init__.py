"""Report kinds any config may use (among them the default robustness table and figure of every
experiment), and the paper-vs-ours comparison of all three papers."""
