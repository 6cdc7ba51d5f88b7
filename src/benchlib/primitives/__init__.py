"""Primitives: errors, atomic files and checksums, seeds, YAML, bounds, the output layout and
benchlib's own folder, CPU kernels, pretrained-weight paths and the metrics; they import nothing
above them."""
