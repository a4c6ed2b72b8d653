"""Pairwise Arena: chat with language models and compare them side by side."""

__version__ = "0.1.0"
