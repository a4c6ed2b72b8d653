"""Battles as numbers: each battle's two models as indices into the sorted names and model A's
score (`Coded`), the distinct outcomes and their counts (`Grouped`, the unit the bootstrap
resamples), and the counts read off them (per model, per pair). Pure pandas/numpy.

A battles frame has columns model_a, model_b, winner ("model_a", "model_b", "tie", "tie (bothbad)")
and tstamp. Ties of either kind count as half a win for each side.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd


def scores(battles: pd.DataFrame) -> np.ndarray:
    """Model A's score per battle: 1 win, 0 loss, 0.5 for either kind of tie."""
    winner = battles["winner"]
    won, lost = winner.eq("model_a").to_numpy(bool, na_value=False), winner.eq("model_b").to_numpy(bool, na_value=False)
    return np.where(won, 1.0, np.where(lost, 0.0, 0.5))


def models_of(battles: pd.DataFrame) -> list[str]:
    return encode(battles).models


def model_codes(battles: pd.DataFrame, models: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Each battle's two models as indices into `models`."""
    coded = encode(battles)
    if coded.models == models:
        return coded.a, coded.b
    index = pd.Index(models).get_indexer(coded.models)
    return index[coded.a], index[coded.b]


@dataclass(frozen=True)
class Coded:
    """A battles frame as numbers: the models (sorted), each battle's two as indices into them,
    and model A's score. Everything below works on these; strings are read once."""

    models: list[str]
    a: np.ndarray
    b: np.ndarray
    score: np.ndarray

    def keys(self) -> np.ndarray:
        """Each battle's (a, b, score) outcome as one integer, ordered as (a, b, score) sort."""
        return (self.a * len(self.models) + self.b) * 3 + np.rint(self.score * 2).astype(np.int64)

    def take(self, rows: np.ndarray) -> Coded:
        """These battles' `rows` (indices or a mask), in that order."""
        return Coded(self.models, self.a[rows], self.b[rows], self.score[rows])

    def grouped(self, upto: int | None = None) -> Grouped:
        """The distinct outcomes of the battles (the first `upto` of them) and their counts."""
        keys = self.keys() if upto is None else self.keys()[:upto]
        return grouped_keys(np.bincount(keys, minlength=3 * len(self.models) ** 2), self.models)


@dataclass(frozen=True)
class Grouped:
    """Distinct (a, b, score) outcomes, in (a, b, score) order, and how often each occurred: the
    unit the bootstrap resamples."""

    models: list[str]
    outcomes: np.ndarray  # (k, 2) model indices
    score: np.ndarray
    weight: np.ndarray


def encode(battles: pd.DataFrame) -> Coded:
    n = len(battles)
    both = pd.concat([battles["model_a"], battles["model_b"]], ignore_index=True)
    codes, uniques = pd.factorize(both, use_na_sentinel=False)
    names = [str(u) for u in uniques]
    order = sorted(range(len(names)), key=names.__getitem__)
    position = np.empty(len(names), dtype=np.int64)
    position[order] = np.arange(len(names))
    codes = position[codes] if len(names) else codes.astype(np.int64)
    return Coded([names[i] for i in order], codes[:n], codes[n:], scores(battles))


def grouped_keys(counts: np.ndarray, models: list[str]) -> Grouped:
    """`Grouped` from counts per outcome key (`Coded.keys`)."""
    n = len(models)
    keys = np.flatnonzero(counts)
    pair, half = np.divmod(keys, 3)
    return Grouped(
        models,
        np.column_stack([pair // n, pair % n]).astype(np.int64) if n else np.zeros((0, 2), np.int64),
        half / 2.0,
        counts[keys].astype(float),
    )


def grouped_outcomes(battles: pd.DataFrame, models: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Unique (a, b, score) outcomes and how often each occurred: the unit the bootstrap resamples."""
    a, b = model_codes(battles, models)
    g = Coded(models, a, b, scores(battles)).grouped()
    return g.outcomes, g.score, g.weight


def record_counts(battles: pd.DataFrame) -> pd.DataFrame:
    """Battles, wins, ties and losses per model."""
    return grouped_records(encode(battles).grouped())


def grouped_records(g: Grouped) -> pd.DataFrame:
    """`record_counts` of grouped outcomes."""
    n, a, b, s, w = len(g.models), g.outcomes[:, 0], g.outcomes[:, 1], g.score, g.weight

    def count(value: float) -> np.ndarray:  # battles in which the model scored `value`
        return (np.bincount(a, w * (s == value), n) + np.bincount(b, w * (s == 1.0 - value), n)).astype(np.int64)

    return pd.DataFrame(
        {
            "battles": (np.bincount(a, w, n) + np.bincount(b, w, n)).astype(np.int64),
            "wins": count(1.0),
            "ties": count(0.5),
            "losses": count(0.0),
        },
        index=pd.Index(g.models, name="model"),
    )


def _pair_matrix(g: Grouped, values: np.ndarray) -> np.ndarray:
    """Sum of `values` per (a, b) pair of the outcomes: an n x n matrix, a in rows."""
    n = len(g.models)
    return np.bincount(g.outcomes[:, 0] * n + g.outcomes[:, 1], values, n * n).reshape(n, n)


def pair_counts(battles: pd.DataFrame, order: list[str] | None = None, g: Grouped | None = None) -> pd.DataFrame:
    """Symmetric matrix: how many battles each pair of models fought. (`g`: the battles, grouped.)"""
    g = g or encode(battles).grouped()
    counts = _pair_matrix(g, g.weight)
    table = pd.DataFrame(
        (counts + counts.T).astype(np.int64),
        index=pd.Index(g.models, name="model_a"),
        columns=pd.Index(g.models, name="model_b"),
    )
    models = order or g.models
    return table.reindex(index=models, columns=models, fill_value=0)


def win_fraction(battles: pd.DataFrame, order: list[str] | None = None, g: Grouped | None = None) -> pd.DataFrame:
    """Row model's share of points against the column model (ties half), over all their battles,
    whichever side each was on. NaN where two models never met. (`g`: the battles, grouped.)"""
    g = g or encode(battles).grouped()
    counts, points = _pair_matrix(g, g.weight), _pair_matrix(g, g.weight * g.score)
    met = counts + counts.T
    share = np.divide(points + (counts - points).T, met, out=np.full(met.shape, np.nan), where=met > 0)
    table = pd.DataFrame(share, index=pd.Index(g.models, name="row"), columns=pd.Index(g.models, name="col"))
    models = order or g.models
    return table.reindex(index=models, columns=models).astype(float)
