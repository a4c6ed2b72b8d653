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
order, it marks the outcome it judges with probability p, else one of the other two evenly. Three
judges: one that knows and judges the person's own vote (p = 0.7, about what published judges
reach with ties; rho = 1: its verdict on a voted battle is a noisy copy of that vote, the
pessimistic case), one that knows and errs half apart from the voter (p = 0.7, rho = 0.5: half
its verdicts judge another person's vote on the same pair, drawn afresh, as a real judge reading
the same replies errs only partly with the person), and one that guesses (p = 1/3). Two sources
of verdicts for each:
- `logged`: the judge has judged every logged human battle (the history, and each new vote as it
  comes), as `python -m webui.judge` does.
- `logged + J`: the same, and J battles of the newcomer that no person voted on (opponents drawn
  evenly, judged against the vote a person would have cast): a replay's pairs, whose verdicts the
  arena's composite reads as battles nobody voted on (the FRESH rows, weighed apart by `auto`).
Each judge and source draws from its own random stream: the human votes are the same in every row,
and rows that differ only in how the verdicts are weighed see the same verdicts.

At every checkpoint (every REFRESH human votes) the newcomer's rank is read off the human board
(bench.votes.pairing's fit of the human votes) and off the composite (webui.leaderboard.stats.composite:
`auto_weight` on the human votes and the judgments, then `composite_board` at that weight). Per
seed: the votes until its rank is right and stays right to the end of the run (as bench.votes.pairing
reads the top 3, for the newcomer alone); over the seeds: the median and the worst, and the share
of (seed, checkpoint) pairs where the rank is right. Diagnostic rows give the judges that know
weights set by hand (logged / fresh) instead of `auto`'s, `auto` with the fresh verdicts weighed by
their measured dispersion, the judge-only battles against the newcomer's two true neighbours
instead of every model, and the same judge with its verdicts drawn afresh ("another draw": how far
luck alone moves a row). Figures, never asserts.

    python -m bench.votes.judge_composite --first-seed 8 --seeds 8 --rows "guesses" --jobs 2
"""

from __future__ import annotations

import argparse
import random
import sys
import zlib
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from bench.votes.pairing import ESTABLISHED, HISTORY, NEWCOMER, REFRESH, TRUE, WEIGHTS, Tally, to_points, vote
from webui.arena.pairing import Evidence, draw_smart, pair_gains
from webui.arena.rules import draw_pair
from webui.judge.records import ORDERS, WINNER_OF
from webui.judge.simulate import judged_outcome, judgment
from webui.leaderboard.stats import scale
from webui.leaderboard.stats.composite import FRESH, VOTE, FreshRule, auto_weight, composite_board


@dataclass(frozen=True)
class Judge:
    accuracy: float  # p: how often it marks the outcome it judges
    shared: float = 1.0  # rho: how often that outcome is the person's own vote (webui.judge.simulate)


COPIES, OWN, GUESSES = "knows (p = 0.7)", "knows, errs half apart (p = 0.7, ρ = 0.5)", "guesses (p = 1/3)"
JUDGES = {COPIES: Judge(0.7), OWN: Judge(0.7, 0.5), GUESSES: Judge(1 / 3)}
JUDGE_ONLY = 1_000  # the newcomer's battles judged with no person's vote, in the `logged + J` source
NEIGHBOURS = ("command-r", "solar-10.7b")  # the newcomer's true neighbours, 20 points above and below
TRUE_RANK = sorted(TRUE, key=TRUE.__getitem__, reverse=True).index(NEWCOMER)  # 0-based: 2
OUTCOME = {1.0: "model_a", 0.0: "model_b", 0.5: "tie"}


@dataclass
class Source:
    """One judge on one source of battles: its judgments (one row per order) as they grow, drawn
    from a random stream of its own (`rng`, one per judge and source), so that a row's figures do
    not depend on which other rows run, and the human votes not at all."""

    judge: Judge
    judge_only: int
    rng: np.random.Generator
    fixed: tuple[float, float] | None = None  # weights (logged, fresh) set by hand instead of `auto`
    opponents: tuple[str, ...] = tuple(ESTABLISHED)  # of the judge-only battles, drawn evenly
    fresh_rule: FreshRule = "one"  # auto_weight's rule for the fresh verdicts' weight
    rows: list[tuple[str, str, str, bool, int]] = field(default_factory=list)  # model_a, model_b, winner, fresh, vote
    weights: list[float] = field(default_factory=list)  # the logged verdicts' weight at each checkpoint
    right: list[bool] = field(default_factory=list)  # the newcomer's rank right, per checkpoint
    fresh_weights: list[float] = field(default_factory=list)  # auto's weight of the fresh verdicts

    def judge_battle(self, a: str, b: str, human: str | None, vote_id: int = -1) -> None:
        """Both orders of the battle of human vote number `vote_id` (`human` its outcome), or of a
        battle nobody voted on (human None): judged against a person's vote drawn afresh."""

        def fresh() -> str:  # drawn only when needed: the copying judge's stream stays as it was
            return OUTCOME[vote(self.rng, a, b)]

        seen = fresh() if human is None else judged_outcome(self.rng, human, self.judge.shared, fresh)
        for order in ORDERS:
            mark = judgment(self.rng, seen, order, self.judge.accuracy, 0.0)
            self.rows.append((a, b, WINNER_OF[order][mark], human is None, vote_id))

    def add_judge_only(self) -> None:
        """The newcomer's judge-only battles, on the day it joins: opponents drawn evenly, sides too."""
        for _ in range(self.judge_only):
            a, b = NEWCOMER, self.opponents[int(self.rng.integers(len(self.opponents)))]
            if self.rng.random() < 0.5:
                a, b = b, a
            self.judge_battle(a, b, None)


@dataclass
class Run:
    seed: int
    humans: list[bool]  # the human board's newcomer rank right, per checkpoint
    sources: dict[str, Source]


def sources_of(seed: int, pick: str = "") -> dict[str, Source]:
    """Each judge on each source (`auto`), and the diagnostic rows: weights (logged, fresh) set by
    hand, and judge-only battles against the newcomer's two neighbours only. Only the rows whose
    name holds `pick`."""
    sources: dict[str, Source] = {}

    def add(
        name: str,
        judge: str,
        judge_only: int,
        opponents: tuple[str, ...] = tuple(ESTABLISHED),
        draw: int = 0,
        **more: object,
    ) -> None:
        # rows that differ only in how verdicts are weighed see the very same verdicts (one stream
        # per judge, source and `draw`): their figures differ by the weighing alone
        stream = zlib.crc32(f"{judge}|{judge_only}|{opponents}{f'|{draw}' if draw else ''}".encode())
        if pick in name:
            rng = np.random.default_rng([seed, stream])
            sources[name] = Source(JUDGES[judge], judge_only, rng, opponents=opponents, **more)  # type: ignore[arg-type]

    extra = f"logged + {JUDGE_ONLY:,}"
    for judge in JUDGES:
        add(f"{judge}, logged", judge, 0)
        add(f"{judge}, {extra}", judge, JUDGE_ONLY)
    for judge in (COPIES, OWN):
        for fixed in ((1.0, 1.0), (0.0, 1.0)):
            add(f"{judge}, {extra}, w = {fixed[0]:g} / {fixed[1]:g} fixed", judge, JUDGE_ONLY, fixed=fixed)
    add(f"{COPIES}, logged, w = 1 fixed", COPIES, 0, fixed=(1.0, 1.0))
    for judge in JUDGES:
        add(f"{judge}, {extra}, fresh by dispersion", judge, JUDGE_ONLY, fresh_rule="dispersion")
    add(f"{COPIES}, {extra} vs the neighbours", COPIES, JUDGE_ONLY, opponents=NEIGHBOURS)
    # the same judge and source again, its verdicts drawn afresh: how far luck alone moves a row
    add(f"{COPIES}, {extra}, another draw", COPIES, JUDGE_ONLY, draw=1)
    return sources


def run(seed: int, votes: int, pick: str = "") -> Run:
    """HISTORY weighted human votes among the established models (each judged by every source),
    the judge-only battles of the newcomer, then `votes` smart-paired human votes (judged too),
    with both boards read every REFRESH votes."""
    outcomes, draws = np.random.default_rng(seed), random.Random(seed)
    names = list(TRUE)
    tally = Tally(names)
    human_rows: list[tuple[str, str, str, int]] = []
    sources = sources_of(seed, pick)

    def add(a: str, b: str) -> None:
        score = vote(outcomes, a, b)
        tally.add(a, b, score)
        for source in sources.values():
            source.judge_battle(a, b, OUTCOME[score], vote_id=len(human_rows))
        human_rows.append((a, b, OUTCOME[score], len(human_rows)))

    for _ in range(HISTORY):
        add(*draw_pair(dict.fromkeys(ESTABLISHED, 1.0), draws))
    for source in sources.values():
        source.add_judge_only()
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
        if source.fixed is None:
            chosen = auto_weight(human, judged, fresh_rule=source.fresh_rule)
            weight, fresh = chosen.weight, chosen.fresh_weight
            source.fresh_weights.append(fresh)
        else:
            weight, fresh = source.fixed
        board = composite_board(human, judged, weight, fresh)
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
    weight: str  # auto's weights: median at the first checkpoint and at the last


def summarise(runs: Sequence[Run]) -> list[Row]:
    humans = np.array([settled_at(r.humans) for r in runs])
    rows = [
        Row("humans alone", float(np.median(humans)), float(humans.max()), _share([r.humans for r in runs]), 0, 0, "")
    ]
    print(f"per seed, humans alone: {humans.tolist()}", file=sys.stderr)
    for name in runs[0].sources:
        settled = np.array([settled_at(r.sources[name].right) for r in runs])
        print(f"per seed, {name}: {settled.tolist()}", file=sys.stderr)
        rows.append(
            Row(
                f"composite, judge {name}",
                float(np.median(settled)),
                float(settled.max()),
                _share([r.sources[name].right for r in runs]),
                int(np.sum(settled > humans)),
                int(np.sum(settled < humans)),
                _weights([r.sources[name] for r in runs]),
            )
        )
    return rows


def _weights(sources: Sequence[Source]) -> str:
    """auto's weights, median over seeds at the first checkpoint and the last: logged (and fresh)."""

    def span(series: Sequence[Sequence[float]]) -> str:
        return f"{np.median([s[0] for s in series]):.3g} → {np.median([s[-1] for s in series]):.3g}"

    if sources[0].fixed is not None:
        return "fixed"
    text = span([s.weights for s in sources])
    return text + (f" (fresh {span([s.fresh_weights for s in sources])})" if sources[0].judge_only else "")


def _share(rights: Sequence[Sequence[bool]]) -> float:
    return float(np.mean([x for right in rights for x in right]))


def table(rows: Sequence[Row], seeds: str, votes: int) -> str:
    def count(x: float) -> str:
        return f"{x:,.0f}" if np.isfinite(x) else f"> {votes:,}"

    lines = [
        f"| board ({seeds}) | newcomer's rank right for good: median human votes | worst seed | "
        "rank right, share of checkpoints | seeds later / sooner than humans alone | "
        "auto's weight on logged (fresh) verdicts, median, first → last |",
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
    parser.add_argument("--first-seed", type=int, default=0, help="the first seed; default 0")
    parser.add_argument("--votes", type=int, default=1_500, help="human votes after the newcomer joins; default 1500")
    parser.add_argument("--rows", default="", help="only the composite rows whose name holds this text")
    parser.add_argument("--jobs", type=int, default=1, help="seeds run at once, one process each; default 1")
    args = parser.parse_args(argv)
    if args.seeds < 1 or args.votes < REFRESH or args.jobs < 1 or args.first_seed < 0:
        print(
            f"error: --seeds and --jobs must be at least 1, --first-seed 0 or more, --votes at least {REFRESH}",
            file=sys.stderr,
        )
        return 2
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    with ProcessPoolExecutor(args.jobs) as pool:
        runs = []
        for done in pool.map(run, seeds, [args.votes] * len(seeds), [args.rows] * len(seeds)):
            runs.append(done)
            print(f"seed {done.seed} done", file=sys.stderr, flush=True)
    print(table(summarise(runs), f"seeds {seeds[0]}-{seeds[-1]}", args.votes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
