"""Saved boards: a snapshot of the board and what it was built from (`snapshot`), what changed
between two (`changes`), and the command line's `--snapshot` and `--diff` (`cli`)."""
