"""Choosing a battle's pair: by the operator's weights, or where the next vote teaches the board most.

`weighted` is the plain draw (`rules.draw_pair`). `smart` scores every pair of eligible models by
how much one more vote between them is expected to shrink the rating uncertainty, and draws a pair
with a chance proportional to that gain (times the two models' weights); a share of battles
(EXPLORE) is still a plain weighted draw, so that every pair keeps being seen and the choice stays
unpredictable. The gain is the Bradley-Terry Fisher information (docs/leaderboard.md, "Pairing"):

    information  I = sum over pairs n_ij p_ij (1 - p_ij) x x^T + RIDGE,   x = e_i - e_j
    uncertainty  U = sum over neighbouring ranks r of Var(theta_r - theta_r+1),  Var from I^-1
    gain(i, j)   = U now - U after one more vote between i and j  (Sherman-Morrison, exact)

A model nobody has rated yet has almost no information, so every pair that includes it has a
large gain: a new model gets most battles until its interval is as narrow as its neighbours', then
the gain moves on to the close calls of the ranking. No clock, no I/O: the same evidence and the
same seeded rng give the same pair, and nothing about the choice leaves the server (the handler
keeps the pair in the session, which the page never sees before the vote).
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from webui.arena.rules import draw_pair, eligible_weights
from webui.config import PAIRING_MODES
from webui.leaderboard.board.favours import FAVOUR_SHARE, Favour

EXPLORE = 0.1  # share of smart battles that are a plain weighted draw
RIDGE = 1e-2  # prior information per model (log-odds^-2): a model without votes has variance 100
LOG_ODDS_PER_POINT = math.log(10) / 400  # the board's Elo scale: 400 points = 10x the odds


@dataclass(frozen=True)
class Evidence:
    """What the board knows when a pair is chosen: ratings on the Elo scale and how many counted
    battles each unordered pair fought. A model missing from either is new: rated at the mean of
    the others, with no battles."""

    ratings: Mapping[str, float] = field(default_factory=dict)
    battles: Mapping[frozenset[str], float] = field(default_factory=dict)

    @classmethod
    def from_tables(cls, ratings: Mapping[str, float], pair_counts: Mapping[str, Mapping[str, float]]) -> Evidence:
        """From a ratings column and a symmetric pair-count table (row model -> column model -> n),
        as the leaderboard's tables hold them."""
        battles: dict[frozenset[str], float] = {}
        for a, row in pair_counts.items():
            for b, n in row.items():
                if a != b and n and math.isfinite(float(n)):
                    battles[frozenset((a, b))] = float(n)
        return cls({m: float(r) for m, r in ratings.items() if math.isfinite(float(r))}, battles)


def choose_pair(
    mode: str,
    weights: Mapping[str, float],
    evidence: Evidence | None,
    rng: random.Random,
    favoured: Sequence[Favour] = (),
) -> tuple[str, str]:
    """The battle's two models on their sides. `smart` without evidence (no board yet) draws by
    weight. Weight 0 keeps a model out in either mode. While a `favoured` pair is active (fewer
    counted battles between the two than it asks for), FAVOUR_SHARE of battles draw one of them."""
    if mode not in PAIRING_MODES:
        raise ValueError(f"pairing: must be one of {', '.join(PAIRING_MODES)}, got {mode!r}")
    active = active_favours(favoured, weights, evidence)
    if active and rng.random() < FAVOUR_SHARE:
        pair = list(rng.choice(active).pair())
        pair.sort()  # a set's order is not the seed's: sort, then shuffle with the rng
        rng.shuffle(pair)
        return pair[0], pair[1]
    if mode == "weighted" or evidence is None:
        return draw_pair(weights, rng)
    return draw_smart(weights, pair_gains(sorted(eligible_weights(weights)), evidence), rng)


def active_favours(favoured: Sequence[Favour], weights: Mapping[str, float], evidence: Evidence | None) -> list[Favour]:
    """The favours still short of their battles, between two models that can battle now."""
    if evidence is None:  # no board yet: nothing counts the battles a favour asks for
        return []
    eligible = eligible_weights(weights)
    return [
        f for f in favoured if f.a in eligible and f.b in eligible and evidence.battles.get(f.pair(), 0.0) < f.until
    ]


def draw_smart(
    weights: Mapping[str, float], gains: Mapping[tuple[str, str], float], rng: random.Random
) -> tuple[str, str]:
    """EXPLORE of the time a weighted draw; otherwise a pair drawn with a chance proportional to
    weight_i * weight_j * gain(i, j) (`pair_gains`), on random sides."""
    if rng.random() < EXPLORE:
        return draw_pair(weights, rng)
    eligible = eligible_weights(weights)
    pairs = sorted(pair for pair in gains if pair[0] in eligible and pair[1] in eligible)
    chances = [eligible[a] * eligible[b] * max(gains[(a, b)], 0.0) for a, b in pairs]
    if not any(c > 0 for c in chances):  # nothing left to learn, or too little to tell apart
        return draw_pair(weights, rng)
    pair = list(rng.choices(pairs, weights=chances)[0])
    rng.shuffle(pair)
    return pair[0], pair[1]


def pair_gains(candidates: Sequence[str], evidence: Evidence) -> dict[tuple[str, str], float]:
    """gain(i, j) for every pair of `candidates` (i before j by name): the drop in the summed
    variance (log-odds^2) of the rating differences of neighbouring candidates, in rating order,
    expected from one more vote between i and j. The information comes from every model the
    evidence knows (a retired model still links the others), the ranking only from candidates."""
    names = sorted(set(candidates) | set(evidence.ratings))
    theta = _strengths(names, evidence)
    p = 1.0 / (1.0 + np.exp(theta[None, :] - theta[:, None]))
    per_vote = p * (1.0 - p)  # Fisher information of one vote on theta_i - theta_j
    counts = np.array([[evidence.battles.get(frozenset((a, b)), 0.0) if a != b else 0.0 for b in names] for a in names])
    weight = counts * per_vote
    covariance = np.linalg.inv(np.diag(weight.sum(axis=1) + RIDGE) - weight)
    index = {name: k for k, name in enumerate(names)}
    ranked = sorted((index[c] for c in set(candidates)), key=lambda k: -theta[k])
    contrasts = np.zeros((max(len(ranked) - 1, 0), len(names)))  # rows: rank r minus rank r + 1
    contrasts[np.arange(len(ranked) - 1), ranked[:-1]] = 1.0
    contrasts[np.arange(len(ranked) - 1), ranked[1:]] = -1.0
    projected = contrasts @ covariance  # C Sigma
    gains: dict[tuple[str, str], float] = {}
    for a, b in itertools.combinations(sorted(set(candidates)), 2):
        i, j = index[a], index[b]
        spread = covariance[i, i] + covariance[j, j] - 2.0 * covariance[i, j]  # x' Sigma x
        reach = projected[:, i] - projected[:, j]  # C Sigma x
        gains[(a, b)] = float(per_vote[i, j] * (reach @ reach) / (1.0 + per_vote[i, j] * spread))
    return gains


def _strengths(names: list[str], evidence: Evidence) -> np.ndarray:
    """Log-odds strengths; a model without a rating sits at the mean of the rated ones."""
    known = [evidence.ratings[m] for m in names if m in evidence.ratings]
    mean = sum(known) / len(known) if known else 0.0
    return np.array([evidence.ratings.get(m, mean) - mean for m in names]) * LOG_ODDS_PER_POINT
