"""Benchmarks, one module per ``benchlib bench`` subcommand: ``overhead`` (engine vs the bare
loop), ``flower`` (the engine vs Flower's simulation engine), ``stream`` (streamed vs resident
training), ``scale`` (paper-scale cells on a device) and ``kernels`` (native vs portable CPU
kernels); shared parts in ``bare``, ``memory``, ``synthetic``, ``device`` and ``packing``.
Every benchmark prints ratios measured in one process; no timing is asserted anywhere."""
