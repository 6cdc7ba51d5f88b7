"""The statistics every report kind uses, one module per job: ``table`` (the table statistic:
per-client means, mean and std across clients; how a metric is shown), ``inference`` (bootstrap
intervals, paired and one-sided tests, Holm's correction, power), ``ranking`` (ranks over
blocks, the Friedman and post-hoc tests, IQM), ``order`` (Kendall's tau of two method orders)
and ``paper`` (the LIGHTYEAR paper-vs-ours statistics)."""
