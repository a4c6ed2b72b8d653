"""The fast board gives the numbers of the straightforward computation it replaced.

The board codes the models once, groups outcomes with np.bincount, runs the bootstrap rounds and
the voters' fits as arrays, and takes the style intervals from one fit. The reference here is the
slow path, written out as the code was before: outcomes grouped by pandas over the model names,
one Newton fit per bootstrap round (the same seeded draws), the style fit from zero, and the
style intervals from the percentile bootstrap."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from webui.db.columns import STYLE_COUNT_COLUMNS
from webui.leaderboard.board.build import Board, BoardOptions, board_from_logs
from webui.leaderboard.simulate import simulate
from webui.leaderboard.stats import battle_codes, bradley_terry, ratings, style
from webui.leaderboard.stats.history import cut_points


@pytest.fixture(scope="module")
def board(tmp_path_factory: pytest.TempPathFactory) -> Board:
    folder = tmp_path_factory.mktemp("simulated")
    simulate(folder, 3000)
    return board_from_logs(folder, BoardOptions())


def reference_groups(battles: pd.DataFrame) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    """Distinct (a, b, score) outcomes and their counts, grouped by pandas over the names."""
    models = sorted(set(battles["model_a"]).union(battles["model_b"]))
    frame = pd.DataFrame(
        {
            "a": [models.index(m) for m in battles["model_a"]],
            "b": [models.index(m) for m in battles["model_b"]],
            "s": battle_codes.scores(battles),
        }
    )
    counts = frame.groupby(["a", "b", "s"], sort=True).size().reset_index(name="n")
    return (
        models,
        counts[["a", "b"]].to_numpy(dtype=np.int64),
        counts["s"].to_numpy(float),
        counts["n"].to_numpy(float),
    )


def elo(theta: np.ndarray) -> np.ndarray:
    return 1000.0 + theta * 400.0 / np.log(10.0)


def reference_raw(battles: pd.DataFrame, reference: list[str], rounds: int) -> pd.DataFrame:
    """Ratings, and percentile-bootstrap intervals from one fit per round (the same draws)."""
    models, outcomes, score, weight = reference_groups(battles)
    centre = [models.index(m) for m in reference]

    def fit(w: np.ndarray) -> np.ndarray:
        theta = bradley_terry.fit_bt(outcomes, score, w, len(models))
        return elo(theta - theta[centre].mean())

    draws = np.random.default_rng(0).multinomial(int(weight.sum()), weight / weight.sum(), size=rounds)
    samples = pd.DataFrame([fit(w) for w in draws.astype(float)], columns=models)
    return pd.DataFrame(
        {"rating": fit(weight), "lower": samples.quantile(0.025), "upper": samples.quantile(0.975)}, index=models
    )


def test_raw_ratings_intervals_and_ranks_are_the_reference(board: Board):
    table = board.table.set_index("model")
    ranked = list(table.index[~table["preliminary"]])
    expected = reference_raw(board.counted, ranked, board.options.rounds).loc[ranked]
    got = table.loc[ranked]
    assert (got["rating"] - expected["rating"]).abs().max() < 1e-6
    assert (got[["lower", "upper"]] - expected[["lower", "upper"]]).abs().max().max() < 1e-6
    assert list(got["rank"]) == list(ratings.ranks(expected["lower"], expected["upper"]).loc[ranked])


def test_style_ratings_are_the_reference_and_ranks_near_the_bootstraps(board: Board):
    """Same style ratings; the intervals come from another method now, so a rank may move by one
    where two intervals nearly touch (on this log: two models of nine, one place each)."""
    table = board.table.set_index("model")
    ranked = list(table.index[~table["preliminary"]])
    battles = board.counted
    counts = battles[list(STYLE_COUNT_COLUMNS)].astype(float)
    models = sorted(set(battles["model_a"]).union(battles["model_b"]))
    a = np.array([models.index(m) for m in battles["model_a"]])
    b = np.array([models.index(m) for m in battles["model_b"]])
    x = style.style_matrix(counts)
    params = style.fit_bt_style(a, b, battle_codes.scores(battles), x, np.ones(len(a)), len(models))  # from zero
    theta = pd.Series(params[: len(models)], index=models)
    expected = pd.Series(elo(theta - theta[ranked].mean()), index=models).loc[ranked]
    assert (table.loc[ranked, "style_rating"] - expected).abs().max() < 0.5
    samples = style.style_bootstrap(battles, board.options.rounds, 0, counts, ranked)
    bounds = bradley_terry.intervals(samples)[lambda f: f.index.isin(ranked)]
    moved = table.loc[ranked, "style_rank"].astype(int) - ratings.ranks(bounds["lower"], bounds["upper"]).loc[ranked]
    assert moved.abs().max() <= 1 and (moved != 0).sum() <= 2
    width = (table.loc[ranked, "style_upper"] - table.loc[ranked, "style_lower"]) / (bounds["upper"] - bounds["lower"])
    assert width.between(0.7, 1.4).all(), width  # the sandwich and the bootstrap agree on the spread


def test_history_is_the_reference(board: Board):
    ordered = board.counted.sort_values("tstamp", kind="stable").reset_index(drop=True)
    ranked = list(board.table.loc[~board.table["preliminary"], "model"])
    history = board.history
    for k in cut_points(len(ordered), board.options.history_points)[::4]:
        upto = ordered.iloc[:k]
        present = [m for m in ranked if m in set(upto["model_a"]).union(upto["model_b"])]
        expected = bradley_terry.bradley_terry(upto, reference=present or None)
        got = history[history["battles"] == k].set_index("model")["rating"]
        assert (got - expected.loc[got.index]).abs().max() < 1e-6
        assert set(got.index) == set(present)


def test_win_fraction_pair_counts_and_records_are_the_reference(board: Board, tmp_path: Path):
    battles, order = board.counted, list(board.table["model"])
    s = battle_codes.scores(battles)
    points = pd.concat(
        [
            pd.DataFrame({"row": battles["model_a"].to_numpy(), "col": battles["model_b"].to_numpy(), "p": s}),
            pd.DataFrame({"row": battles["model_b"].to_numpy(), "col": battles["model_a"].to_numpy(), "p": 1.0 - s}),
        ]
    )
    share = points.pivot_table(index="row", columns="col", values="p", aggfunc="mean").reindex(
        index=order, columns=order
    )
    pd.testing.assert_frame_equal(board.win_fraction, share.astype(float), check_names=False)
    pairs = pd.crosstab(battles["model_a"], battles["model_b"]).reindex(index=order, columns=order, fill_value=0)
    pd.testing.assert_frame_equal(board.pair_counts, (pairs + pairs.T).astype(int), check_names=False)
    side = pd.concat(
        [
            pd.DataFrame({"model": battles["model_a"].to_numpy(), "s": s}),
            pd.DataFrame({"model": battles["model_b"].to_numpy(), "s": 1.0 - s}),
        ]
    )
    wins = side[side["s"] == 1.0].groupby("model").size().reindex(order, fill_value=0)
    assert list(board.table["wins"]) == list(wins)
    assert list(board.table["battles"]) == list(side.groupby("model").size().reindex(order))
