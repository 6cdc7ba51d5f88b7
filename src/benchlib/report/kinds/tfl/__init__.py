"""Report kinds of TFL's tables and figures, and their shared cell readers (``runs``)."""
