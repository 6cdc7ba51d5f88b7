"""Report kinds of LIGHTYEAR's own tables and figures (topology, agreement views, samples)."""
