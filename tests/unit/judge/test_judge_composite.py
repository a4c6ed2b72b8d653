"""The composite board: human votes and a judge's verdicts in one Bradley-Terry fit."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from webui.judge.records import ORDERS, WINNER_OF
from webui.judge.simulate import judgment
from webui.leaderboard.stats import composite
from webui.leaderboard.stats.battle_codes import grouped_keys
from webui.leaderboard.stats.bradley_terry import RIDGE, bradley_terry, fit_bt
from webui.leaderboard.stats.composite import auto_weight, composite_board
from webui.leaderboard.stats.scale import BASE, SCALE

TRUE = {"w": -1.0, "x": -0.3, "y": 0.3, "z": 1.0}  # log-odds strengths


def battles(n: int, seed: int, judge: str = "people") -> pd.DataFrame:
    """n battles between TRUE's models; winners as people vote, or as a judge that knows the
    strengths ("knows"), or one that tosses a coin ("guesses")."""
    rng = np.random.default_rng(seed)
    names, rows = list(TRUE), []
    for i in range(n):
        a, b = rng.choice(names, 2, replace=False)
        p = 1 / (1 + math.exp(TRUE[b] - TRUE[a]))
        won = rng.random() < (0.5 if judge == "guesses" else p)
        rows.append({"model_a": a, "model_b": b, "winner": "model_a" if won else "model_b", "tstamp": float(i)})
    return pd.DataFrame(rows)


def test_weight_zero_is_the_human_board_and_a_judge_that_votes_as_people_do_joins_their_fit() -> None:
    human, judged = battles(300, 1), battles(400, 2, judge="knows")
    alone = composite_board(human, judged, 0.0).set_index("model")["rating"]
    assert alone.to_dict() == pytest.approx(bradley_terry(human).to_dict(), abs=1e-6)
    # this judge prefers as people do (its scale comes out near 1): at w = 2 a judgment weighs a vote,
    # and the board is close to the fit of both tables as votes
    together = composite_board(human, judged, 2.0).set_index("model")["rating"]
    direct = bradley_terry(pd.concat([human, judged], ignore_index=True))
    assert together.to_dict() == pytest.approx(direct.to_dict(), abs=15)


def scaled(n: int, seed: int, scale: float) -> pd.DataFrame:
    """A judge whose log-odds are `scale` times people's (0: a coin)."""
    rng = np.random.default_rng(seed)
    names, rows = list(TRUE), []
    for _ in range(n):
        a, b = rng.choice(names, 2, replace=False)
        won = rng.random() < 1 / (1 + math.exp(scale * (TRUE[b] - TRUE[a])))
        rows.append({"model_a": a, "model_b": b, "winner": "model_a" if won else "model_b"})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("scale", [1.0, 0.5, 0.0])
def test_the_judges_own_scale_is_found_and_the_fit_is_the_optimum(scale: float) -> None:
    """k estimates the judge's scale, and (theta, k) is where the objective's gradient vanishes,
    checked by finite differences of the log-likelihood written out here."""
    human, judged = battles(2000, 11), scaled(20_000, 12, scale)
    coded_h, coded_j = composite._coded(human, judged)
    n_keys = 3 * len(coded_h.models) ** 2
    g_h = grouped_keys(np.bincount(coded_h.keys(), minlength=n_keys).astype(float), coded_h.models)
    g_j = grouped_keys(0.5 * np.bincount(coded_j.keys(), minlength=n_keys), coded_h.models)
    theta, k, k_se = composite.fit_scaled(g_h, g_j, np.zeros(len(coded_h.models)))
    assert k == pytest.approx(scale, abs=0.08)

    def objective(x: np.ndarray) -> float:
        t, kk = x[:-1], x[-1]
        total = -0.5 * RIDGE * t @ t
        for g, c in ((g_h, 1.0), (g_j, kk)):
            for (a, b), s, w in zip(g.outcomes, g.score, g.weight, strict=True):
                p = 1 / (1 + math.exp(-c * (t[a] - t[b])))
                total += w * (s * math.log(p) + (1 - s) * math.log(1 - p))
        return total

    x = np.append(theta, k)
    for i in range(len(x)):
        step = np.zeros_like(x)
        step[i] = 1e-5
        assert (objective(x + step) - objective(x - step)) / 2e-5 == pytest.approx(0.0, abs=1e-2)
    # k's standard error: from the curvature at the optimum, here by second differences
    h, m = 1e-3, len(x)
    curvature = np.zeros((m, m))
    for i in range(m):
        for j in range(m):
            e_i, e_j = np.eye(m)[i] * h, np.eye(m)[j] * h
            curvature[i, j] = -(
                objective(x + e_i + e_j)
                - objective(x + e_i - e_j)
                - objective(x - e_i + e_j)
                + objective(x - e_i - e_j)
            ) / (4 * h * h)
    assert k_se == pytest.approx(math.sqrt(np.linalg.inv(curvature)[-1, -1]), rel=0.02)


def test_a_guessing_judges_many_verdicts_do_not_pull_the_ratings_together() -> None:
    """From people's fit, 3,000 coin tosses beside 120 votes: k comes out near 0 and the ratings
    stay people's (k and the ratings fitted at once from k = 1 would sink every rating toward 0)."""
    human, judged = battles(120, 5), battles(3000, 6, judge="guesses")
    coded_h, coded_j = composite._coded(human, judged)
    g_h, g_j = composite._grouped(coded_h, coded_j, np.ones(len(coded_j.a)), np.ones(len(coded_h.a), dtype=bool))
    people = fit_bt(g_h.outcomes, g_h.score, g_h.weight, len(g_h.models))
    fitted = composite.fit_scaled(g_h, g_j, people)
    assert abs(fitted.k) < 3 * fitted.k_se < 0.3
    assert np.ptp(fitted.theta) == pytest.approx(np.ptp(people), rel=0.1)


def test_a_model_with_verdicts_only_is_provisional() -> None:
    human = battles(200, 3)
    judged = pd.concat(
        [battles(100, 4, judge="knows"), pd.DataFrame([{"model_a": "new", "model_b": "w", "winner": "model_a"}] * 6)]
    )
    table = composite_board(human, judged, 0.5).set_index("model")
    assert bool(table.loc["new", "provisional"]) and table.loc["new", "human_battles"] == 0
    assert not table.drop(index="new")["provisional"].any()
    assert "new" not in set(composite_board(human, judged, 0.0)["model"])  # no weight, no row
    with pytest.raises(ValueError, match="judge weight"):
        composite_board(human, judged, -1.0)


def test_auto_weight_trusts_a_judge_that_knows_and_not_one_that_guesses() -> None:
    human = battles(120, 5)  # few human votes
    knows = auto_weight(human, battles(3000, 6, judge="knows"))
    guesses = auto_weight(human, battles(3000, 7, judge="guesses"))
    assert knows.weight >= 0.5 and knows.log_loss[knows.weight] == knows.log_loss.min() < knows.log_loss[0.0]
    assert knows.scale is not None and knows.scale.shows_signal
    # a coin-tossing judge's scale is about 0, within its error: no weight is tried, none trusted
    assert guesses.weight == 0.0 and guesses.log_loss.empty
    assert guesses.scale is not None and not guesses.scale.shows_signal
    assert auto_weight(human.iloc[:3], battles(10, 8)).weight == 0.0  # too few votes to hold out


def test_held_out_votes_count_by_the_fewer_votes_of_their_two_models() -> None:
    """auto's emphasis: a vote weighs 1 over the human votes of its less-voted model, so a
    newcomer's few votes are not drowned by the established models' many."""
    human = pd.DataFrame(
        [("x", "y", "model_a")] * 6 + [("x", "new", "model_b")] * 2, columns=["model_a", "model_b", "winner"]
    )
    coded, _ = composite._coded(human, human.iloc[:0])
    # x: 8 votes, y: 6, new: 2
    assert composite.sparse_emphasis(coded).tolist() == [1 / 6] * 6 + [1 / 2] * 2


def test_verdicts_on_battles_nobody_voted_on_weigh_apart() -> None:
    """FRESH rows (a replay's pairs) take their own weight: at 0 for the logged verdicts and 1 for
    them, the ratings are the fresh verdicts' fit alone at the k that every verdict calibrates;
    `auto` gives them 1 for a judge that knows, 0 for one that guesses."""
    human = battles(300, 21)
    logged, fresh = battles(400, 22, judge="knows"), battles(400, 23, judge="knows")
    both = pd.concat([logged.assign(fresh=False), fresh.assign(fresh=True)], ignore_index=True)
    apart = composite_board(human, both, 0.0, 1.0).set_index("model")
    coded_h, coded_j = composite._coded(human, both)
    everyone, every = np.ones(len(human), dtype=bool), np.ones(len(both), dtype=bool)
    k = composite.calibrated(coded_h, coded_j, everyone, every).k
    g_h, g_fresh = composite._grouped(coded_h, coded_j, both["fresh"].to_numpy(float), everyone)
    theta = composite.fit_scaled(g_h, g_fresh, fit_bt(g_h.outcomes, g_h.score, g_h.weight, 4), k=k).theta
    points = dict(zip(coded_h.models, theta * SCALE / math.log(BASE), strict=True))
    assert apart.loc["z", "rating"] - apart.loc["w", "rating"] == pytest.approx(points["z"] - points["w"], abs=1e-6)
    assert apart["judge_judgments"].sum() == 2 * len(fresh)  # (each verdict is two models' judgment)
    assert composite_board(human, both, 0.5).equals(composite_board(human, both, 0.5, 0.5))
    assert auto_weight(human, both).fresh_weight == 1.0
    guessing = pd.concat([logged.assign(fresh=False), battles(3000, 24, judge="guesses").assign(fresh=True)])
    assert auto_weight(battles(120, 5), guessing.iloc[400:]).fresh_weight == 0.0


def _newcomer(n: int, seed: int, scale: float, strength: float) -> pd.DataFrame:
    """n verdicts of a judge of scale `scale` on `new` (of true `strength`) against TRUE's models."""
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(n):
        other = str(rng.choice(list(TRUE)))
        won = rng.random() < 1 / (1 + math.exp(scale * (TRUE[other] - strength)))
        rows.append({"model_a": "new", "model_b": other, "winner": "model_a" if won else "model_b"})
    return pd.DataFrame(rows)


def test_verdicts_that_weigh_nothing_still_calibrate_the_judge_for_a_replays_new_model() -> None:
    """A new model that only a replay's 80 verdicts rate (a judge at half people's scale): its
    rating lands far nearer the truth when the judge's verdicts on logged battles, weighing 0
    toward the ratings, calibrate its scale, than when the replay's few verdicts must find the
    scale and the model's rating at once (mean error over 20 seeds, Elo points)."""
    errors: dict[str, list[float]] = {"calibrated": [], "replay alone": []}
    gap = (0.5 - TRUE["y"]) * SCALE / math.log(BASE)  # the new model's true lead over y
    for seed in range(20):
        human, logged = battles(600, 100 + seed), scaled(2000, 200 + seed, 0.5).assign(fresh=False)
        replay = _newcomer(80, 300 + seed, 0.5, strength=0.5).assign(fresh=True)
        boards = {
            "calibrated": composite_board(human, pd.concat([logged, replay], ignore_index=True), 0.0, 1.0),
            "replay alone": composite_board(human, replay, 1.0),
        }
        for name, board in boards.items():
            rating = board.set_index("model")["rating"]
            errors[name].append(abs(rating["new"] - rating["y"] - gap))
    assert np.mean(errors["calibrated"]) < 0.6 * np.mean(errors["replay alone"]), errors


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_held_out_vote_takes_its_own_verdicts_out_of_the_fit(seed: int) -> None:
    """A judge that only repeats each vote (both orders) knows nothing people did not say: auto
    gives it 0. Left in the fit while their vote was held out, those copies predicted it and
    earned weight 1; a frame without the VOTE column can only be scored that leaky way."""
    human = battles(1000, seed).drop(columns=["tstamp"]).assign(vote=lambda t: [f"v{i}" for i in range(len(t))])
    parrot = pd.concat([human, human], ignore_index=True)
    linked = auto_weight(human, parrot)
    assert linked.scale is not None and linked.scale.shows_signal
    assert linked.weight == 0.0, linked.log_loss
    unlinked = auto_weight(human.drop(columns=["vote"]), parrot.drop(columns=["vote"]))
    assert unlinked.weight == 1.0 and unlinked.log_loss[1.0] < unlinked.log_loss[0.0] - 1e-4


def _voted_and_judged(n: int, seed: int, strengths: dict[str, float]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """n votes among `strengths` (15% ties, else a win whose chance makes the expected score the
    Bradley-Terry one) and the simulated judge's two orders on each (p = 0.7, webui.judge.simulate)."""
    rng, names = np.random.default_rng(seed), list(strengths)
    votes, judged = [], []
    for i in range(n):
        a, b = (str(x) for x in rng.choice(names, 2, replace=False))
        p = 1 / (1 + math.exp(strengths[b] - strengths[a]))
        won = rng.random() < (p - 0.075) / 0.85
        winner = "tie" if rng.random() < 0.15 else "model_a" if won else "model_b"
        votes.append((a, b, winner, i))
        for order in ORDERS:
            judged.append((a, b, WINNER_OF[order][judgment(rng, winner, order, 0.7, 0.0)], i))
    columns = ["model_a", "model_b", "winner", "vote"]
    return pd.DataFrame(votes, columns=columns), pd.DataFrame(judged, columns=columns)


def test_a_fresh_verdict_weighs_by_the_variance_verdicts_show_against_what_the_fit_assumes() -> None:
    """`dispersion`: the simulated judge's two orders err apart, and ties score a half, so the mean
    of a verdict's two orders varies about 0.128 where the fit at its scale (k about 0.55) assumes
    0.25, and a vote (15% ties) 0.2125 where it assumes 0.25: a verdict nobody voted on is worth
    0.85 / 0.51 = 1.66 votes' weight (docs/judge.md), and `auto` gives it the ratio computed here."""
    close = {"w": -0.4, "x": -0.13, "y": 0.13, "z": 0.4}  # near-even pairs (the derivation's d = 0), yet k clear of 0
    human, judged = _voted_and_judged(4000, 31, close)
    fresh = _voted_and_judged(300, 32, close)[1].assign(vote=-1, fresh=True)
    both = pd.concat([judged.assign(fresh=False), fresh], ignore_index=True)
    chosen = auto_weight(human, both, fresh_rule="dispersion")
    assert chosen.fresh_weight == pytest.approx(1.66, abs=0.12)
    # by hand: residuals at people's fit, the verdict's as the mean of its two orders at k
    rating = bradley_terry(human.drop(columns=["vote"])) * math.log(BASE) / SCALE
    score = {"model_a": 1.0, "model_b": 0.0, "tie": 0.5}
    p_h = 1 / (1 + np.exp(rating[human["model_b"]].to_numpy() - rating[human["model_a"]].to_numpy()))
    s_h = human["winner"].map(score).to_numpy()
    people = np.sum((s_h - p_h) ** 2) / np.sum(p_h * (1 - p_h))
    k = chosen.scale.k if chosen.scale is not None else math.nan
    mean = judged.assign(s=judged["winner"].map(score)).groupby("vote")["s"].mean().to_numpy()
    p_j = 1 / (1 + np.exp(k * (rating[human["model_b"]].to_numpy() - rating[human["model_a"]].to_numpy())))
    judge = np.sum((mean - p_j) ** 2) / np.sum(p_j * (1 - p_j))
    assert chosen.fresh_weight == pytest.approx(people / judge, rel=1e-3)
    assert auto_weight(human, both).fresh_weight == 1.0  # the rule "one": a vote's weight
