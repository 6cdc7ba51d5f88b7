"""Report kinds of FedAgain's figures and tables (bars, box plots, Figure 13, trust weights)."""
