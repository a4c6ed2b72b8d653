"""Benchmarks for Pairwise Arena: `python -m bench` (or `make bench`).

Kept apart from the test suite on purpose: tests assert behaviour and must pass on any machine;
these numbers depend on the machine, so they are measured, printed and recorded, never asserted.
See docs/performance.md for what each section measures and the latest figures.
"""
