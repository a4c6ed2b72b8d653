"""Benchmarks for Pairwise Arena: `python -m bench` (or `make bench`).

Kept apart from the test suite on purpose: tests assert behaviour and must pass on any machine;
these numbers depend on the machine, so they are measured, printed and recorded, never asserted.
See docs/performance.md for what each section measures and the latest figures.

The map, one folder per question:

    __main__.py   `python -m bench`: the serving sections, run in order, tables printed, JSON written
    report.py     tables (pure formatting) and the facts about the machine every result carries
    stats.py      pure statistics helpers (medians, rates, percentiles)
    serving/      one server and its models: overhead, first token, panes, many users, cold start,
                  memory, the browser, engines; the short GPU lease, the soak
    votes/        the vote index and the board at scale, and the leaderboard's statistics on
                  simulated votes (pairing, decisions, categories, the judge's composite)
    tier/         several servers: the relay behind nginx, the shared board, SQLite against PostgreSQL
    results/      saved runs that docs/performance.md quotes

Every module with a `main` runs as `python -m bench.<folder>.<module>`; its docstring says how.
"""
