"""How far a judge agrees with people: on the battles that have both a human vote and a judge's
verdict. Pure numpy/pandas: a table in, figures with 95% intervals out.

A judge is asked each battle in both orders (webui.judge); each order's parsed verdict is one
judgment, compared with the human vote. Ties and "both bad" are one outcome, tie, as lmarena
counts them; outcomes are model_a, model_b, tie.
- **Agreement with ties**: the share of judgments equal to the human vote (three outcomes).
- **Agreement without ties**: the same, over judgments where both the person and the judge chose a
  side (the figure most papers quote: 85-88% for GPT-4-class judges on Chatbot Arena).
- **Cohen's kappa**: agreement beyond what the two would reach by chance given how often each picks
  each outcome; 0 for a judge that guesses, 1 for perfect agreement.
- **Position consistency**: of the battles with both orders parsed, the share where the verdict
  names the same reply whichever is shown first.
- **Unparsed**: the share of answers that held no verdict.
Shares get Wilson score intervals; kappa and the boards' rank correlation a percentile bootstrap
over battles (both orders of a battle stay together: they are not independent).

The judge's board against the human board: Bradley-Terry on the judgments, and on the human votes
of the same battles; Spearman's rank correlation of the two ratings with its bootstrap interval,
and the pairs of models that the two boards order differently.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from webui.leaderboard.stats.bradley_terry import bradley_terry
from webui.leaderboard.stats.confidence import Z

OUTCOMES = ("model_a", "model_b", "tie")
ORDER_COLUMNS = ("verdict_ab", "verdict_ba")  # each order's verdict, in the battles table's words, or None


@dataclass(frozen=True)
class Share:
    """k of n, with its 95% Wilson score interval (nan when n is 0)."""

    k: int
    n: int
    value: float
    lower: float
    upper: float

    @classmethod
    def of(cls, k: int, n: int) -> Share:
        if n == 0:
            return cls(0, 0, math.nan, math.nan, math.nan)
        p = k / n
        centre = (p + Z**2 / (2 * n)) / (1 + Z**2 / n)
        half = Z * math.sqrt(p * (1 - p) / n + Z**2 / (4 * n * n)) / (1 + Z**2 / n)
        # exact ends where the share is: floating point would leave 1e-17 above 0
        return cls(k, n, p, 0.0 if k == 0 else max(0.0, centre - half), 1.0 if k == n else min(1.0, centre + half))

    def text(self) -> str:
        if not self.n:
            return "n/a (none)"
        return f"{self.value:.0%} ({self.lower:.0%} to {self.upper:.0%}; {self.k} of {self.n})"


@dataclass(frozen=True)
class Agreement:
    battles: int
    with_ties: Share
    without_ties: Share
    kappa: float
    kappa_lower: float
    kappa_upper: float
    consistency: Share
    unparsed: Share


@dataclass(frozen=True)
class BoardAgreement:
    models: int
    spearman: float
    lower: float
    upper: float
    discordant: list[tuple[str, str]] = field(default_factory=list)  # (above for people, above for the judge)


def outcome(winner: object) -> str | None:
    """model_a, model_b or tie (either kind); None for anything else (no verdict)."""
    if winner in ("model_a", "model_b"):
        return str(winner)
    return "tie" if isinstance(winner, str) and winner.startswith("tie") else None


def judgments(table: pd.DataFrame) -> pd.DataFrame:
    """One row per parsed judgment: the battle's position in `table`, the human outcome, the judge's."""
    human = np.array([outcome(v) for v in table["human"]], dtype=object)
    rows = []
    for column in ORDER_COLUMNS:
        judge = np.array([outcome(v) for v in table[column]], dtype=object)
        keep = np.array(
            [isinstance(j, str) and isinstance(h, str) for j, h in zip(judge, human, strict=True)], dtype=bool
        )
        rows.append(pd.DataFrame({"battle": np.flatnonzero(keep), "human": human[keep], "judge": judge[keep]}))
    return pd.concat(rows, ignore_index=True)


def cohen_kappa(human: np.ndarray, judge: np.ndarray) -> float:
    """Cohen's kappa of two raters over OUTCOMES; nan where chance agreement is certain."""
    n = len(human)
    if n == 0:
        return math.nan
    observed = float(np.mean(human == judge))
    chance = sum(float(np.mean(human == o)) * float(np.mean(judge == o)) for o in OUTCOMES)
    return math.nan if chance >= 1 else (observed - chance) / (1 - chance)


def agreement(table: pd.DataFrame, rounds: int = 200, seed: int = 0) -> Agreement:
    """`table`: one row per judged battle with `human` and the ORDER_COLUMNS."""
    pairs = judgments(table)
    human, judge = pairs["human"].to_numpy(object), pairs["judge"].to_numpy(object)
    decisive = (human != "tie") & (judge != "tie")
    orders = table[list(ORDER_COLUMNS)]
    parsed = orders.map(lambda v: outcome(v) is not None)
    both = parsed.all(axis=1).to_numpy(bool)
    ab = np.array([outcome(v) for v in table["verdict_ab"]], dtype=object)
    ba = np.array([outcome(v) for v in table["verdict_ba"]], dtype=object)
    lower, upper = _kappa_interval(pairs, len(table), rounds, seed)
    return Agreement(
        battles=len(table),
        with_ties=Share.of(int((human == judge).sum()), len(pairs)),
        without_ties=Share.of(int((human == judge)[decisive].sum()), int(decisive.sum())),
        kappa=cohen_kappa(human, judge),
        kappa_lower=lower,
        kappa_upper=upper,
        consistency=Share.of(int((ab == ba)[both].sum()), int(both.sum())),
        unparsed=Share.of(int((~parsed.to_numpy(bool)).sum()), 2 * len(table)),
    )


def _kappa_interval(pairs: pd.DataFrame, battles: int, rounds: int, seed: int) -> tuple[float, float]:
    if rounds <= 0 or pairs.empty or battles < 2:
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    code = {o: i for i, o in enumerate(OUTCOMES)}
    cell = np.array([3 * code[h] + code[j] for h, j in zip(pairs["human"], pairs["judge"], strict=True)])
    # each battle's judgments as one row of cell counts: a round draws battles, both orders together
    battle_ids, position = np.unique(pairs["battle"].to_numpy(), return_inverse=True)
    per_battle = np.zeros((len(battle_ids), 9))
    np.add.at(per_battle, (position, cell), 1)
    values = []
    for _ in range(rounds):
        counts = per_battle[rng.integers(0, len(battle_ids), len(battle_ids))].sum(axis=0).reshape(3, 3)
        values.append(_kappa_of_counts(counts))
    finite = [v for v in values if not math.isnan(v)]
    if not finite:
        return math.nan, math.nan
    return float(np.percentile(finite, 2.5)), float(np.percentile(finite, 97.5))


def _kappa_of_counts(counts: np.ndarray) -> float:
    """Cohen's kappa of a 3x3 table (rows: people's outcome, columns: the judge's)."""
    n = counts.sum()
    if not n:
        return math.nan
    observed = np.trace(counts) / n
    chance = float((counts.sum(axis=1) / n) @ (counts.sum(axis=0) / n))
    return math.nan if chance >= 1 else float((observed - chance) / (1 - chance))


def board_agreement(table: pd.DataFrame, rounds: int = 200, seed: int = 0) -> BoardAgreement:
    """`table`: as for `agreement`, with model_a and model_b."""
    human, judge = _human_battles(table), _judge_battles(table)
    human_board, judge_board = _ratings(human), _ratings(judge)
    models = sorted(set(human_board.index) & set(judge_board.index))
    rho = _spearman(human_board, judge_board, models)
    rng = np.random.default_rng(seed)
    # a round draws battles, a battle's rows (one human vote, up to two judgments) together
    human_rows = pd.Series(range(len(human)), index=human["battle"]).groupby(level=0).indices
    judge_rows = pd.Series(range(len(judge)), index=judge["battle"]).groupby(level=0).indices
    none = np.zeros(0, dtype=int)
    samples = []
    for _ in range(rounds if len(models) >= 3 else 0):
        drawn = rng.integers(0, len(table), len(table))
        h = np.concatenate([human_rows.get(b, none) for b in drawn])
        j = np.concatenate([judge_rows.get(b, none) for b in drawn])
        samples.append(_spearman(_ratings(human.iloc[h]), _ratings(judge.iloc[j]), models))
    finite = [s for s in samples if not math.isnan(s)]
    lower, upper = (
        (float(np.percentile(finite, 2.5)), float(np.percentile(finite, 97.5))) if finite else (math.nan,) * 2
    )
    discordant = [
        (a, b) if human_board[a] > human_board[b] else (b, a)
        for i, a in enumerate(models)
        for b in models[i + 1 :]
        if (human_board[a] - human_board[b]) * (judge_board[a] - judge_board[b]) < 0
    ]
    return BoardAgreement(len(models), rho, lower, upper, discordant)


def _human_battles(table: pd.DataFrame) -> pd.DataFrame:
    return _battles(table, ["human"])


def _judge_battles(table: pd.DataFrame) -> pd.DataFrame:
    return _battles(table, list(ORDER_COLUMNS))


def _battles(table: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """model_a, model_b, winner (the decided ones only), tstamp and the battle's position, a row per
    column's verdict."""
    a, b = table["model_a"].to_numpy(object), table["model_b"].to_numpy(object)
    parts = []
    for column in columns:
        winner = np.array([outcome(v) for v in table[column]], dtype=object)
        keep = np.array([w is not None for w in winner], dtype=bool)
        battle = np.flatnonzero(keep)
        parts.append(pd.DataFrame({"model_a": a[keep], "model_b": b[keep], "winner": winner[keep], "battle": battle}))
    battles = pd.concat(parts, ignore_index=True)
    return battles.assign(tstamp=np.arange(len(battles), dtype=float))


def _ratings(battles: pd.DataFrame) -> pd.Series:
    if battles.empty:
        return pd.Series(dtype=float)
    return bradley_terry(battles)


def _spearman(x: pd.Series, y: pd.Series, models: list[str]) -> float:
    present = [m for m in models if m in x.index and m in y.index]
    if len(present) < 3:
        return math.nan
    rx, ry = x[present].rank().to_numpy(float), y[present].rank().to_numpy(float)
    if rx.std() == 0 or ry.std() == 0:
        return math.nan
    return float(np.corrcoef(rx, ry)[0, 1])


SWAPPED = {"model_a": "model_b", "model_b": "model_a"}


def as_shown(table: pd.DataFrame) -> pd.DataFrame:
    """The judgments with the reply shown first as model_a (in order ba, model B's): the battles
    for a position term (webui.leaderboard.stats.position)."""
    ab = pd.DataFrame({"model_a": table["model_a"], "model_b": table["model_b"], "winner": table["verdict_ab"]})
    ba = pd.DataFrame(
        {
            "model_a": table["model_b"],
            "model_b": table["model_a"],
            "winner": [SWAPPED.get(str(v), v) for v in table["verdict_ba"]],
        }
    )
    shown = pd.concat([ab, ba], ignore_index=True)
    shown = shown[[outcome(w) is not None for w in shown["winner"]]]
    return shown.assign(tstamp=np.arange(len(shown), dtype=float)).reset_index(drop=True)
