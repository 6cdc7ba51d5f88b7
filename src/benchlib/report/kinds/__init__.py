"""Registered report kinds, one module per kind named like the kind, grouped by paper:
``common`` (kinds any config may use, the defaults of every experiment among them, and the
paper-vs-ours comparison), ``lightyear``, ``fedagain`` and ``tfl``. Each kind module registers
its kind on import (see :mod:`benchlib.report.base`); the other modules (``common.history``,
``tfl.runs``, the ``paper_*`` helpers of ``paper_comparison``) hold shared helpers and register
nothing."""
