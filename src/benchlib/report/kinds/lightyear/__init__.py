"""Report kinds of LIGHTYEAR's tables and figures (robustness tables, agreement views, samples)."""
