"""Smart pairing against the weighted draw, on votes with known ratings: `python -m bench.votes.pairing`.

    python -m bench.votes.pairing                       # 200 seeds, 12,000 votes each (docs/leaderboard.md)
    python -m bench.votes.pairing --seeds 20 --votes 6000

The arena of `webui.leaderboard.simulate`: its established models (true ratings `TRUE`) have
HISTORY votes drawn by weight; then `late-7b` (1050) joins and every vote from then on is paired by
the policy under test. A vote is a tie TIE_SHARE of the time (the simulator's share) and otherwise
a Bradley-Terry win, with the win chance set so that the expected score (ties half, as the board
counts them) is the Bradley-Terry probability: the board's model is then exactly right, and what
is measured is the pairing. The policy sees the board as of its last rebuild, every REFRESH votes.

Measured per policy, over the seeds:
- votes after it joins until the newcomer's 95% interval is within +-25 points (median and 90th
  percentile over seeds), and whether that interval held its true rating (coverage at stopping);
- votes until the top-3 order is right with 95% probability: the first checkpoint at which the
  estimated top 3, in order, is the true one in at least 95% of the seeds;
- coverage of every model's 95% interval at the end of the run.
The checkpoints use closed-form intervals (the inverse Fisher information at the fit, 1.96
standard errors, centred on the mean as the board's are): the board's bootstrap at every checkpoint
would take hours; it is checked when the newcomer's interval narrows and at the end. Figures, never asserts: tests/unit/arena/test_pairing.py checks a small fixed set of seeds.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from webui.arena.pairing import Evidence, draw_smart, pair_gains
from webui.arena.rules import draw_pair
from webui.leaderboard import simulate
from webui.leaderboard.stats import battle_codes, bradley_terry, scale

NEWCOMER = simulate.LATE
ESTABLISHED = {name: rating for name, rating in simulate.TRUE.items() if name != NEWCOMER}
TRUE = {**ESTABLISHED, NEWCOMER: simulate.TRUE[NEWCOMER]}
HISTORY = 10_000  # votes among the established models before the newcomer joins
REFRESH = 50  # votes between board rebuilds (the policy's view) and between checkpoints
HALF_WIDTH = 25.0  # points: the newcomer's interval is narrow enough
TOP = 3
LEVEL_Z = 1.959964  # 95%
POLICIES = ("weighted", "smart")
WEIGHTS = dict.fromkeys(TRUE, 1.0)
BOOTSTRAP_ROUNDS = 200  # the board's default


@dataclass
class Run:
    """One policy on one seed: when the newcomer's interval got narrow (None: not within the votes)
    and whether it held the truth then (the closed-form interval, and the board's bootstrap one);
    per checkpoint, whether the top-3 order was right; at the end, how many models' intervals held
    their true rating (closed-form, bootstrap)."""

    narrow_at: int | None
    narrow_covered: bool
    narrow_covered_bootstrap: bool
    top_right: list[bool]
    end_covered: int
    end_covered_bootstrap: int


class Tally:
    """Every (a, b, score) outcome's count, as the leaderboard groups them, and the fit of them."""

    def __init__(self, names: Sequence[str]) -> None:
        self.names = list(names)
        self.index = {name: k for k, name in enumerate(self.names)}
        self.counts = np.zeros(3 * len(names) ** 2)  # by `battle_codes.Coded.keys`: (a, b, score) as one integer
        self.games = np.zeros((len(names), len(names)))
        self.theta: np.ndarray | None = None

    def add(self, a: str, b: str, score_a: float) -> None:
        i, j = self.index[a], self.index[b]
        self.counts[(i * len(self.names) + j) * 3 + round(score_a * 2)] += 1
        self.games[i, j] += 1
        self.games[j, i] += 1

    def fit(self) -> tuple[np.ndarray, np.ndarray]:
        """Ratings (log-odds, mean 0) by the leaderboard's fit, and their covariance: the inverse
        Fisher information, centred as the board's ratings are."""
        g = battle_codes.grouped_keys(self.counts, self.names)
        self.theta = bradley_terry.fit_bt(g.outcomes, g.score, g.weight, len(self.names), start=self.theta)
        p = 1.0 / (1.0 + np.exp(self.theta[None, :] - self.theta[:, None]))
        info = self.games * p * (1.0 - p)
        hessian = np.diag(info.sum(axis=1) + bradley_terry.RIDGE) - info
        centre = np.eye(len(self.names)) - 1.0 / len(self.names)  # rating minus the mean
        return self.theta - self.theta.mean(), centre @ np.linalg.inv(hessian) @ centre.T

    def bootstrap_hits(self, truth: np.ndarray, seed: int) -> np.ndarray:
        """Whether each model's interval on the board (its percentile bootstrap, BOOTSTRAP_ROUNDS
        rounds, mean of all models at 1000) holds the true rating."""
        g = battle_codes.grouped_keys(self.counts, self.names)
        bounds = bradley_terry.intervals(
            bradley_terry.bootstrap_grouped(g, BOOTSTRAP_ROUNDS, seed, reference=self.names)
        )
        true = pd.Series(to_points(truth) + scale.INIT, index=self.names)
        return ((bounds["lower"] <= true) & (true <= bounds["upper"])).to_numpy()


def to_points(log_odds: np.ndarray) -> np.ndarray:
    return log_odds * 400 / math.log(10)


def vote(rng: np.random.Generator, a: str, b: str) -> float:
    """Model A's score: a tie TIE_SHARE of the time, else a win with the chance that makes the
    expected score the Bradley-Terry probability of the true ratings."""
    if rng.random() < simulate.TIE_SHARE:
        return 0.5
    p = 1.0 / (1.0 + 10.0 ** ((TRUE[b] - TRUE[a]) / 400.0))
    win = (p - simulate.TIE_SHARE / 2) / (1.0 - simulate.TIE_SHARE)
    return 1.0 if rng.random() < win else 0.0


def run(policy: str, seed: int, votes: int, bootstrap: bool = False) -> Run:
    """HISTORY weighted votes among the established models, then `votes` more paired by `policy`
    (`bootstrap`: also check the board's bootstrap intervals, when narrow and at the end)."""
    outcomes, draws = np.random.default_rng(seed), random.Random(seed)
    names = list(TRUE)
    tally = Tally(names)
    for _ in range(HISTORY):
        a, b = draw_pair(dict.fromkeys(ESTABLISHED, 1.0), draws)
        tally.add(a, b, vote(outcomes, a, b))
    truth = np.array([TRUE[n] for n in names]) * math.log(10) / 400
    truth -= truth.mean()
    true_top = sorted(names, key=TRUE.__getitem__, reverse=True)[:TOP]
    new = names.index(NEWCOMER)
    narrow_at: int | None = None
    narrow_covered = narrow_bootstrap = False
    top_right: list[bool] = []
    done = 0
    while True:
        theta, cov = tally.fit()
        half = LEVEL_Z * np.sqrt(np.diag(cov))
        if narrow_at is None and to_points(half[new]) <= HALF_WIDTH:
            narrow_at, narrow_covered = done, bool(abs(theta[new] - truth[new]) <= half[new])
            narrow_bootstrap = bootstrap and bool(tally.bootstrap_hits(truth, seed)[new])
        top_right.append([names[k] for k in np.argsort(-theta, kind="stable")[:TOP]] == true_top)
        if done + REFRESH > votes:
            break
        board = Evidence(
            dict(zip(names, to_points(theta) + scale.INIT, strict=True)),
            {frozenset((x, y)): tally.games[i, j] for i, x in enumerate(names) for j, y in enumerate(names) if i < j},
        )
        gains = pair_gains(names, board) if policy == "smart" else {}
        for _ in range(REFRESH):
            a, b = draw_smart(WEIGHTS, gains, draws) if policy == "smart" else draw_pair(WEIGHTS, draws)
            tally.add(a, b, vote(outcomes, a, b))
        done += REFRESH
    end = int(tally.bootstrap_hits(truth, seed).sum()) if bootstrap else 0
    return Run(narrow_at, narrow_covered, narrow_bootstrap, top_right, int(np.sum(np.abs(theta - truth) <= half)), end)


@dataclass(frozen=True)
class Summary:
    policy: str
    seeds: int
    narrow_median: float  # votes until the newcomer's interval is within +-HALF_WIDTH (inf: not reached)
    narrow_p90: float
    narrow_coverage: tuple[float, float]  # its interval held the truth then: closed-form, bootstrap
    top_votes: float  # votes until the top 3 are right in 95% of the seeds (inf: not within the votes)
    end_coverage: tuple[float, float]  # every model's interval at the end: closed-form, bootstrap


def summarise(policy: str, runs: Sequence[Run]) -> Summary:
    narrow = np.array([r.narrow_at if r.narrow_at is not None else np.inf for r in runs], dtype=float)
    reached = [r for r in runs if r.narrow_at is not None] or [Run(None, False, False, [], 0, 0)]
    share = np.mean([r.top_right for r in runs], axis=0)
    hit = np.flatnonzero(share >= 0.95)
    return Summary(
        policy,
        len(runs),
        float(np.median(narrow)),
        float(np.quantile(narrow, 0.9)),
        (
            float(np.mean([r.narrow_covered for r in reached])),
            float(np.mean([r.narrow_covered_bootstrap for r in reached])),
        ),
        float(hit[0] * REFRESH) if len(hit) else float("inf"),
        (
            float(np.mean([r.end_covered for r in runs]) / len(TRUE)),
            float(np.mean([r.end_covered_bootstrap for r in runs]) / len(TRUE)),
        ),
    )


def compare(seeds: Sequence[int], votes: int, bootstrap: bool = True) -> dict[str, Summary]:
    return {policy: summarise(policy, [run(policy, seed, votes, bootstrap) for seed in seeds]) for policy in POLICIES}


def table(results: dict[str, Summary], votes: int) -> str:
    def count(x: float) -> str:
        return f"{x:,.0f}" if np.isfinite(x) else f"> {votes:,}"

    def shares(pair: tuple[float, float]) -> str:
        return f"{pair[0]:.1%} / {pair[1]:.1%}"

    lines = [
        "| pairing | seeds | newcomer within ±25: median votes | 90th pct | its coverage then "
        "(closed-form / bootstrap) | top-3 order right in 95% of seeds | coverage at the end "
        "(closed-form / bootstrap) |",
        "|---|---|---|---|---|---|---|",
    ]
    for s in results.values():
        lines.append(
            f"| {s.policy} | {s.seeds} | {count(s.narrow_median)} | {count(s.narrow_p90)} | "
            f"{shares(s.narrow_coverage)} | {count(s.top_votes)} | {shares(s.end_coverage)} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.votes.pairing", description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=200, help="seeds per policy; default 200")
    parser.add_argument("--votes", type=int, default=12_000, help="votes after the newcomer joins; default 12000")
    args = parser.parse_args(argv)
    if args.seeds < 1 or args.votes < REFRESH:
        print(f"error: --seeds must be at least 1 and --votes at least {REFRESH}", file=sys.stderr)
        return 2
    print(table(compare(range(args.seeds), args.votes), args.votes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
