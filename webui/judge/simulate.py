"""A simulated judge of known accuracy and position bias, over the battle votes of a log folder:
for checking that the agreement figures find what is known (webui.leaderboard.simulate makes the
log; tests/integration/test_judge.py checks them).

    python -m webui.judge.simulate LOGDIR --accuracy 0.7 [--position-bias 0.1] [--seed 0] [--name sim-judge]

For each battle vote a judging run would pick, and each order: with probability `position_bias`
the judge marks the reply shown first, whatever the replies say; otherwise, with probability
`accuracy`, it marks the outcome the person voted (model_a, model_b or tie), else one of the other
two, evenly. Its agreement with ties is then (1 - b) p + b q (q: the share of votes for the side
shown first), so p where b is 0; p = 1/3 with b = 0 is a judge that guesses (kappa about 0).
Verdict lines are written as a judging run writes them, with the prompt version "simulated".

That judge sees only the person's vote: its verdict on a voted battle is a noisy copy of that vote
(the pessimistic case; an arena log holds nothing else to judge). A real judge and a person read
the same two replies and err only partly together; `judged_outcome` models that for a caller
that can draw another person's vote on the pair (bench.votes.judge_composite): with probability
`shared` (rho) the judge judges the person's own vote, else an independent draw of the vote a
person would cast. p is then the judge's accuracy on the outcome it judges, and its agreement with
the person who voted falls to rho p + (1 - rho) (c p + (1 - c) (1 - p) / 2), c being the chance
that two people's votes on the pair agree.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from webui.judge.records import ORDERS, WINNER_OF, Asked, VerdictLog, judged, verdict_record
from webui.judge.run import battles_to_judge
from webui.leaderboard.stats.agreement import outcome
from webui.leaderboard.votes.index import VoteIndex

PROMPT_VERSION = "simulated"
MARK_OF = {
    order: {winner: mark for mark, winner in marks.items() if winner != "tie (bothbad)"}
    for order, marks in WINNER_OF.items()
}


def judgment(rng: np.random.Generator, human: str, order: str, accuracy: float, position_bias: float) -> str:
    """The mark the simulated judge gives in one order (see the module's docstring)."""
    if rng.random() < position_bias:
        return "A"
    others = [o for o in ("model_a", "model_b", "tie") if o != human]
    said = human if rng.random() < accuracy else others[int(rng.integers(len(others)))]
    return MARK_OF[order][said]


def judged_outcome(rng: np.random.Generator, human: str, shared: float, independent: Callable[[], str]) -> str:
    """The outcome the judge's verdict is about (`judgment` marks it): the person's vote with
    probability `shared` (1: today's judge, whose errors are the voter's), else `independent()`,
    another person's vote on the same pair, drawn afresh (the judge errs apart from the voter).
    Drawn once per battle: both orders judge the same replies."""
    if not 0 <= shared <= 1:
        raise ValueError(f"shared: a probability (0 to 1), got {shared}")
    return human if shared >= 1 or rng.random() < shared else independent()


def simulate_verdicts(
    log_dir: Path,
    accuracy: float,
    position_bias: float = 0.0,
    *,
    seed: int = 0,
    name: str = "sim-judge",
    clock: float | None = None,
) -> int:
    """Write the simulated judge's verdicts for the votes it has none for; how many were written."""
    if not (0 <= accuracy <= 1 and 0 <= position_bias <= 1):
        raise ValueError(f"accuracy and position bias are probabilities (0 to 1), got {accuracy}, {position_bias}")
    rng = np.random.default_rng(seed)
    index = VoteIndex(log_dir)
    try:
        battles = battles_to_judge(index, (), judged(log_dir, name, PROMPT_VERSION))
    finally:
        index.close()
    records = []
    for battle in battles:
        human = outcome(battle.about["human"])
        if human is not None:
            asked = [_asked(rng, human, order, accuracy, position_bias) for order in ORDERS]
            records.append(verdict_record(battle.about, name, None, PROMPT_VERSION, asked, clock or time.time()))
    log = VerdictLog(log_dir)
    try:
        log.write_many(records)
    finally:
        log.close()
    return len(records)


def _asked(rng: np.random.Generator, human: str, order: str, accuracy: float, bias: float) -> Asked:
    mark = judgment(rng, human, order, accuracy, bias)
    return Asked(order, f"[[{mark}]]", mark, 0.0)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m webui.judge.simulate", description=__doc__.split("\n\n")[0])
    p.add_argument("log_dir", type=Path)
    p.add_argument("--accuracy", type=float, required=True, help="p: how often it marks the person's outcome")
    p.add_argument("--position-bias", type=float, default=0.0, help="b: how often it marks the first reply")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--name", default="sim-judge", help="the judge's name in the verdict lines")
    args = p.parse_args(argv)
    if not args.log_dir.is_dir():
        print(f"error: {args.log_dir} is not a folder", file=sys.stderr)
        return 2
    try:
        written = simulate_verdicts(args.log_dir, args.accuracy, args.position_bias, seed=args.seed, name=args.name)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {written} simulated verdicts of {args.name} to {args.log_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
