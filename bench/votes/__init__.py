"""Votes and what is built from them: the index and the board at scale, and the leaderboard's
statistics checked on simulated votes with known true ratings. No server is started here.

    scale.py          the vote index and the board at 20k, 200k and 1M votes (`python -m bench.votes.scale`)
    board.py          the board alone from a battles table
    style_tally.py    the tally with and without style control
    verdict_reads.py  reading a judge's verdicts
    compiled_steps.py what each compiled module is worth to a cold index
    pairing.py decisions.py categories.py judge_composite.py   the statistics' goals, on simulations
"""
