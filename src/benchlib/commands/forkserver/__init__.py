"""A warm parent process that forks one child per cell (``benchlib forkserver -- COMMAND``).

Every cell is a fresh ``benchlib run`` process, and about a third of a small cell's CPU is the
start-up: importing torch, TorchDynamo (pulled in by the first optimizer) and the engine. The fork
server pays that once. ``benchlib forkserver -- snakemake ...`` starts a server that imports the
engine and waits on a Unix socket, runs the command with ``BENCHLIB_FORK_SERVER`` naming that
socket, and stops the server when the command ends. Each ``benchlib run`` the command starts
hands its arguments, working directory, environment and standard streams to the server, which
forks a child to run the cell; the client waits for the child and exits with its status.

Each cell still has a process of its own, so resume and byte-identical results are unchanged.
The server only takes a cell whose import-time settings (CPU kernels, thread variables, Python,
benchlib's location) match its own; anything else, or a server that cannot be reached, runs in
the client's own process as before, with one line on stderr saying why. Torch-free at import.
"""

from __future__ import annotations

ENV_SOCKET = "BENCHLIB_FORK_SERVER"  # set for the wrapped command: the server's socket path
ENV_FORKED = "BENCHLIB_FORKED"  # set in a child: the server's pid (timing.json records it)
