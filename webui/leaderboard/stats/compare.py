"""Is B better than A? One pair of the board, with what a decision needs: the probability that B is
the better model, the rating difference with its 95% interval, their head-to-head record, and about
how many more battles between the two would settle it at 95%. Pure numpy/pandas.

The difference is the board's own (its Bradley-Terry ratings, so the answer never contradicts the
table); its uncertainty comes from bootstrap rounds of the counted battles (the board's rounds and
seed), as the table's intervals do: P(B better) = Phi(difference / se), and the battles needed are
`confidence.battles_to_separate`'s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from webui.leaderboard.stats import confidence
from webui.leaderboard.stats.bradley_terry import bootstrap_bt
from webui.leaderboard.stats.scale import BASE, SCALE


@dataclass(frozen=True)
class Comparison:
    a: str
    b: str
    difference: float  # rating of b - rating of a, Elo points
    lower: float  # its 95% interval (nan without bootstrap rounds)
    upper: float
    p_b_better: float
    b_wins: int  # head to head, counted battles between the two
    ties: int
    a_wins: int
    more_battles: float  # between the two, to make the difference significant at 95% (0: it is)

    def lines(self) -> list[str]:
        played = self.b_wins + self.ties + self.a_wins
        record = (
            f"{self.b} won {self.b_wins}, tied {self.ties} and lost {self.a_wins} of {played} battles against {self.a}"
        )
        if math.isnan(self.p_b_better):
            return [
                f"Is {self.b} better than {self.a}? {self.b} - {self.a} = {self.difference:+.0f} points "
                "(no interval without bootstrap rounds: --rounds N)",
                f"  head to head: {record}",
            ]
        settle = (
            "the difference is significant at 95% already"
            if self.more_battles == 0
            else "no number of battles settles a difference of 0"
            if math.isinf(self.more_battles)
            else f"about {self.more_battles:,.0f} more battles between the two would settle it at 95%"
        )
        return [
            f"Is {self.b} better than {self.a}? P({self.b} better) = {self.p_b_better:.2f}; "
            f"{self.b} - {self.a} = {self.difference:+.0f} points (95%: {self.lower:+.0f} to {self.upper:+.0f})",
            f"  head to head: {record}",
            f"  {settle}",
        ]


def compare(counted: pd.DataFrame, ratings: pd.Series, a: str, b: str, rounds: int, seed: int = 0) -> Comparison:
    """`counted`: the board's counted battles; `ratings`: its ratings by model (both a and b in it)."""
    difference = float(ratings[b] - ratings[a])
    between = counted[
        ((counted["model_a"] == a) & (counted["model_b"] == b))
        | ((counted["model_a"] == b) & (counted["model_b"] == a))
    ]
    b_won = ((between["model_a"] == b) & (between["winner"] == "model_a")) | (
        (between["model_b"] == b) & (between["winner"] == "model_b")
    )
    a_won = ((between["model_a"] == a) & (between["winner"] == "model_a")) | (
        (between["model_b"] == a) & (between["winner"] == "model_b")
    )
    lower = upper = se = math.nan
    if rounds > 0:
        samples = bootstrap_bt(counted, rounds, seed)
        differences = (samples[b] - samples[a]).dropna().to_numpy(float)
        if len(differences) > 1:
            se = float(np.std(differences, ddof=1))
            lower, upper = (float(np.percentile(differences, q)) for q in (2.5, 97.5))
    scale = SCALE / math.log(BASE)
    p = float(confidence.order_probability(np.array([difference]), np.array([se]))[0])
    more = float(confidence.battles_to_separate(np.array([difference]), np.array([se]), scale)[0])
    return Comparison(
        a,
        b,
        difference,
        lower,
        upper,
        p,
        int(b_won.sum()),
        int(len(between) - b_won.sum() - a_won.sum()),
        int(a_won.sum()),
        more,
    )
