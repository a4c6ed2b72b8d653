"""The composite board (human votes and a judge's verdicts, `--judge-weight auto`) against humans
alone, for a new model, on votes with known ratings: `python -m bench.votes.judge_composite`.

    python -m bench.votes.judge_composite                       # 8 seeds, 1,500 human votes after the newcomer joins
    python -m bench.votes.judge_composite --seeds 3 --votes 600

The arena of bench.votes.pairing: the established models of `webui.leaderboard.simulate` have HISTORY
human votes drawn by weight; then `late-7b` (true rank 3 of 9: 20 points below command-r, 20
above solar-10.7b) joins and smart pairing, reading the human board rebuilt every REFRESH votes,
pairs every human vote from then on, as the arena does. A human vote is bench.votes.pairing's (ties
15%, else a Bradley-Terry win on the true ratings).

The judge is webui.judge.simulate's, of accuracy p (and no position bias): asked a battle in each
order, it marks the outcome a person voted with probability p, else one of the other two evenly.
Two sources of verdicts, each tried with a judge that knows (p = 0.7, about what published judges
reach with ties) and one that guesses (p = 1/3):
- `logged`: the judge has judged every logged human battle (the history, and each new vote as it
  comes), as `python -m webui.judge` does; each verdict is about the vote a person cast.
- `logged + J`: the same, and J battles of the newcomer that no person voted on (opponents drawn
  by weight, judged against the vote a person would have cast): what a judge-only source of the
  newcomer's battles would add: a replay's pairs, whose verdicts the arena's composite reads as
  battles nobody voted on (the FRESH rows, weighed apart by `auto`).

At every checkpoint (every REFRESH human votes) the newcomer's rank is read off the human board
(bench.votes.pairing's fit of the human votes) and off the composite (webui.leaderboard.stats.composite:
`auto_weight` on the human votes and the judgments, then `composite_board` at that weight). Per
seed: the votes until its rank is right and stays right to the end of the run (as bench.votes.pairing
reads the top 3, for the newcomer alone); over the seeds: the median and the worst, and the share
of (seed, checkpoint) pairs where the rank is right. Two diagnostic rows give the judge that knows
a weight set by hand (w = FIXED) instead of `auto`'s, to show what more weight would do. Figures,
never asserts.
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from bench.votes.pairing import ESTABLISHED, HISTORY, NEWCOMER, REFRESH, TRUE, WEIGHTS, Tally, to_points, vote
from webui.arena.pairing import Evidence, draw_smart, pair_gains
from webui.arena.rules import draw_pair
from webui.judge.records import ORDERS, WINNER_OF
from webui.judge.simulate import judgment
from webui.leaderboard.stats import scale
from webui.leaderboard.stats.composite import FRESH, VOTE, auto_weight, composite_board

JUDGES = {"knows (p = 0.7)": 0.7, "guesses (p = 1/3)": 1 / 3}
JUDGE_ONLY = 1_000  # the newcomer's battles judged with no person's vote, in the `logged + J` source
FIXED = 1.0  # the diagnostic rows' weight: a verdict weighs what a vote does
TRUE_RANK = sorted(TRUE, key=TRUE.__getitem__, reverse=True).index(NEWCOMER)  # 0-based: 2
OUTCOME = {1.0: "model_a", 0.0: "model_b", 0.5: "tie"}


@dataclass
class Source:
    """One judge on one source of battles: its judgments (one row per order) as they grow."""

    accuracy: float
    judge_only: int
    fixed: float | None = None  # a weight set by hand instead of `auto` (a diagnostic row)
    rows: list[tuple[str, str, str, bool, int]] = field(default_factory=list)  # model_a, model_b, winner, fresh, vote
    weights: list[float] = field(default_factory=list)  # `auto`'s pick at each checkpoint
    right: list[bool] = field(default_factory=list)  # the newcomer's rank right, per checkpoint

    def judge(self, rng: np.random.Generator, a: str, b: str, human: str, vote: int = -1) -> None:
        """Both orders of the battle of human vote number `vote`, or of a battle nobody voted on
        (vote -1, `human` the vote a person would cast): a fresh one."""
        for order in ORDERS:
            mark = judgment(rng, human, order, self.accuracy, 0.0)
            self.rows.append((a, b, WINNER_OF[order][mark], vote < 0, vote))


@dataclass
class Run:
    seed: int
    humans: list[bool]  # the human board's newcomer rank right, per checkpoint
    sources: dict[str, Source]


def sources_of() -> dict[str, Source]:
    """Each judge on each source, and the diagnostic rows."""
    kinds = {"logged": 0, f"logged + {JUDGE_ONLY:,}": JUDGE_ONLY}
    sources = {f"{judge}, {kind}": Source(p, extra) for judge, p in JUDGES.items() for kind, extra in kinds.items()}
    knows = next(iter(JUDGES))
    return sources | {
        f"{knows}, {kind}, w = {FIXED:g} fixed": Source(JUDGES[knows], n, FIXED) for kind, n in kinds.items()
    }


def run(seed: int, votes: int) -> Run:
    """HISTORY weighted human votes among the established models (each judged by every source),
    the judge-only battles of the newcomer, then `votes` smart-paired human votes (judged too),
    with both boards read every REFRESH votes."""
    outcomes, draws, judging = np.random.default_rng(seed), random.Random(seed), np.random.default_rng(seed + 10_000)
    names = list(TRUE)
    tally = Tally(names)
    human_rows: list[tuple[str, str, str]] = []
    sources = sources_of()

    def add(a: str, b: str) -> None:
        score = vote(outcomes, a, b)
        tally.add(a, b, score)
        for source in sources.values():
            source.judge(judging, a, b, OUTCOME[score], vote=len(human_rows))
        human_rows.append((a, b, OUTCOME[score], len(human_rows)))

    for _ in range(HISTORY):
        add(*draw_pair(dict.fromkeys(ESTABLISHED, 1.0), draws))
    for source in sources.values():  # the newcomer's judge-only battles, on the day it joins
        for _ in range(source.judge_only):
            a, b = NEWCOMER, draws.choice(list(ESTABLISHED))  # (all of weight 1)
            if draws.random() < 0.5:  # sides drawn, as in any battle
                a, b = b, a
            source.judge(judging, a, b, OUTCOME[vote(outcomes, a, b)])
    humans: list[bool] = []
    done = 0
    while True:
        theta, _ = tally.fit()
        humans.append(_rank(names, theta) == TRUE_RANK)
        checkpoint(pd.DataFrame(human_rows, columns=["model_a", "model_b", "winner", VOTE]), sources)
        if done + REFRESH > votes:
            break
        evidence = Evidence(
            dict(zip(names, to_points(theta) + scale.INIT, strict=True)),
            {frozenset((x, y)): tally.games[i, j] for i, x in enumerate(names) for j, y in enumerate(names) if i < j},
        )
        gains = pair_gains(names, evidence)
        for _ in range(REFRESH):
            add(*draw_smart(WEIGHTS, gains, draws))
        done += REFRESH
    return Run(seed, humans, sources)


def checkpoint(human: pd.DataFrame, sources: dict[str, Source]) -> None:
    """Each source's composite board (at auto's weight, or its fixed one): the newcomer's rank."""
    for source in sources.values():
        judged = pd.DataFrame(source.rows, columns=["model_a", "model_b", "winner", FRESH, VOTE])
        chosen = auto_weight(human, judged) if source.fixed is None else None
        weight = chosen.weight if chosen is not None else float(source.fixed or 0.0)
        board = composite_board(human, judged, weight, chosen.fresh_weight if chosen is not None else weight)
        source.weights.append(weight)
        ranked = list(board["model"])  # (without the newcomer while no vote or verdict rates it)
        source.right.append(NEWCOMER in ranked and ranked.index(NEWCOMER) == TRUE_RANK)


def _rank(names: list[str], theta: np.ndarray) -> int:
    return [names[k] for k in np.argsort(-theta, kind="stable")].index(NEWCOMER)


def settled_at(right: Sequence[bool]) -> float:
    """Votes until the rank is right at this checkpoint and every later one (inf: not at the end)."""
    if not right or not right[-1]:
        return float("inf")
    k = len(right) - 1
    while k > 0 and right[k - 1]:
        k -= 1
    return float(k * REFRESH)


@dataclass(frozen=True)
class Row:
    board: str
    median: float
    worst: float
    right_share: float
    later_than_humans: int  # seeds where it settles later than the human board does
    earlier_than_humans: int  # ... and sooner
    weight: str  # auto's weight: median at the first checkpoint and at the last


def summarise(runs: Sequence[Run]) -> list[Row]:
    humans = np.array([settled_at(r.humans) for r in runs])
    rows = [
        Row("humans alone", float(np.median(humans)), float(humans.max()), _share([r.humans for r in runs]), 0, 0, "")
    ]
    for name in runs[0].sources:
        settled = np.array([settled_at(r.sources[name].right) for r in runs])
        first = np.median([r.sources[name].weights[0] for r in runs])
        last = np.median([r.sources[name].weights[-1] for r in runs])
        rows.append(
            Row(
                f"composite, judge {name}",
                float(np.median(settled)),
                float(settled.max()),
                _share([r.sources[name].right for r in runs]),
                int(np.sum(settled > humans)),
                int(np.sum(settled < humans)),
                f"{first:g} → {last:g}",
            )
        )
    return rows


def _share(rights: Sequence[Sequence[bool]]) -> float:
    return float(np.mean([x for right in rights for x in right]))


def table(rows: Sequence[Row], seeds: int, votes: int) -> str:
    def count(x: float) -> str:
        return f"{x:,.0f}" if np.isfinite(x) else f"> {votes:,}"

    lines = [
        f"| board ({seeds} seeds) | newcomer's rank right for good: median human votes | worst seed | "
        "rank right, share of checkpoints | seeds later / sooner than humans alone | "
        "auto's weight (median, first → last) |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r.board} | {count(r.median)} | {count(r.worst)} | {r.right_share:.0%} | "
            f"{'' if r.board == 'humans alone' else f'{r.later_than_humans} / {r.earlier_than_humans}'} | {r.weight} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.votes.judge_composite", description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=8, help="seeds; default 8")
    parser.add_argument("--votes", type=int, default=1_500, help="human votes after the newcomer joins; default 1500")
    args = parser.parse_args(argv)
    if args.seeds < 1 or args.votes < REFRESH:
        print(f"error: --seeds must be at least 1 and --votes at least {REFRESH}", file=sys.stderr)
        return 2
    runs = []
    for seed in range(args.seeds):
        runs.append(run(seed, args.votes))
        print(f"seed {seed} done", file=sys.stderr, flush=True)
    print(table(summarise(runs), args.seeds, args.votes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
