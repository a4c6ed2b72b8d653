"""The one compiled part: the identity check's token scan (webui/records/_tokens.c), about a fifth of
indexing a vote's CPU. Optional: where it does not compile, the install goes on and
webui.records.identity uses its Python version (the same results; tests/unit compare the two).
Everything else about the package is in pyproject.toml."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("webui.records._tokens", ["webui/records/_tokens.c"], optional=True)])
