"""bench/votes/judge_composite.py on one short run (vote counts, never times): the stopping rule by hand,
and a guessing judge's composite with `auto` the human board itself, checkpoint by checkpoint."""

from __future__ import annotations

import math

from bench.votes import judge_composite as bench


def test_the_rank_is_right_for_good_from_the_first_checkpoint_of_the_last_right_run() -> None:
    steps = bench.REFRESH
    assert bench.settled_at([False, True, False, True, True]) == 3 * steps
    assert bench.settled_at([True, True]) == 0
    assert math.isinf(bench.settled_at([True, False])) and math.isinf(bench.settled_at([]))


def test_a_guessing_judge_leaves_the_newcomers_rank_as_the_votes_give_it() -> None:
    run = bench.run(seed=1, votes=100)
    guesses = {name: source for name, source in run.sources.items() if source.judge.accuracy < 0.5}
    assert len(guesses) == 3 and len(run.humans) == 3  # the join, then every REFRESH votes
    for source in guesses.values():
        assert source.weights == [0.0] * 3 and source.right == run.humans
    knows = run.sources[f"{bench.COPIES}, logged + {bench.JUDGE_ONLY:,}, w = 1 / 1 fixed"]
    assert knows.right[0], "a thousand verdicts of a judge that knows rank the newcomer before any vote"
    assert not run.humans[0], "the human board cannot place a model nobody has voted on"
