"""The config pipeline: a config file checked and resolved once into its grid of cells, their
specs, its reports and the target list."""
