"""The compiled parts: the hottest steps of indexing a vote (docs/performance.md), the identity
check's token scan (webui/records/_tokens.c), the replies' word counts
(webui/leaderboard/_counts.c), the language detector's ASCII path
(webui/leaderboard/_language.c), a vote's index row (webui/leaderboard/_rows.c) and the board's
online Elo (webui/leaderboard/_elo.c).
Optional: where they do not compile, the install goes on and the modules that use them fall back
to their Python versions (the same results; tests/unit compare the two). Everything else about the package is in pyproject.toml."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("webui.records._tokens", ["webui/records/_tokens.c"], optional=True),
        Extension("webui.leaderboard._counts", ["webui/leaderboard/_counts.c"], optional=True),
        Extension("webui.leaderboard._language", ["webui/leaderboard/_language.c"], optional=True),
        Extension("webui.leaderboard._elo", ["webui/leaderboard/_elo.c"], optional=True),
        Extension("webui.leaderboard._rows", ["webui/leaderboard/_rows.c"], optional=True),
    ]
)
