"""The compiled parts: the hottest steps of indexing a vote (docs/performance.md), the identity
check's token scan (webui/records/_tokens.c), the replies' word counts
(webui/leaderboard/votes/_counts.c), the language detector's ASCII path
(webui/leaderboard/votes/_language.c), a vote's index row (webui/leaderboard/votes/_rows.c) and the board's
online Elo (webui/leaderboard/stats/_elo.c).
Optional: where they do not compile, the install goes on and the modules that use them fall back
to their Python versions (the same results; tests/unit compare the two). Everything else about the package is in pyproject.toml."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("webui.records._tokens", ["webui/records/_tokens.c"], optional=True),
        Extension("webui.leaderboard.votes._counts", ["webui/leaderboard/votes/_counts.c"], optional=True),
        Extension("webui.leaderboard.votes._language", ["webui/leaderboard/votes/_language.c"], optional=True),
        Extension("webui.leaderboard.stats._elo", ["webui/leaderboard/stats/_elo.c"], optional=True),
        Extension("webui.leaderboard.votes._rows", ["webui/leaderboard/votes/_rows.c"], optional=True),
    ]
)
