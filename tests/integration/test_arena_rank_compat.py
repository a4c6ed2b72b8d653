"""Our Bradley-Terry ratings and 95% intervals agree with lmarena's own ranking library, arena-rank
(the code behind LMArena's leaderboard), fitted to the same counted battles.

arena-rank 0.1.1 pins numpy==2.3.3 and jax==0.8.1, so it lives in .venv-arena-rank
(scripts/install-arena-rank.sh, run by `make test`) and runs there as tests/arena_rank_runner.py; the
battles travel as JSON. What the comparison rests on (read from arena-rank's source):

* the model: arena-rank's BradleyTerry minimises the same logistic loss as ours, sum of
  w * [s * d - softplus(d)], d = theta_A - theta_B, on battles aggregated into (A, B, outcome) counts;
* the scale: rating = init_rating + scale / ln(base) * theta with scale 400, base 10 and init_rating
  1000, as ours; its fit starts at 0 and L-BFGS keeps the strengths summing to 0 (the loss gradient
  does), so its mean over *all* models is 1000. Ours puts the mean of the *ranked* models at 1000.
  Both sides are re-centred on the ranked models' mean before comparing;
* ties: its default_outcome_map scores "tie" and "both_bad" 0.5 for model A, a fractional outcome in
  the same loss, i.e. half a win and half a loss each, exactly as we count both kinds of tie. Our
  "tie (bothbad)" is handed over as its "both_bad" (the runner refuses words it does not know,
  because default_outcome_map would quietly read any unknown word as a tie);
* the intervals: arena-rank's are closed-form (a sandwich estimate of the covariance of the
  maximum-likelihood strengths, rating +- 1.96 standard errors), ours are percentile-bootstrap; with
  about 1,000 battles per model both estimate the same spread, so their widths are compared.

rare-1b (two battles, both lost: preliminary on our board) has no finite maximum-likelihood rating:
arena-rank has no penalty and stops its L-BFGS wherever the gradient gets small (far below -1000),
our ridge keeps it finite. Neither is a rating, so it is only checked to come last on both boards;
its two battles go to both fits all the same (the counted battles, unchanged).
"""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from webui.config import PACKAGE_DIR
from webui.leaderboard.board.build import BoardOptions, board_from_logs
from webui.leaderboard.simulate import simulate

ROOT = PACKAGE_DIR.parent
VENV = ROOT / ".venv-arena-rank"
RUNNER = Path(__file__).resolve().parents[1] / "arena_rank_runner.py"
# Our winner words in arena-rank's (its default_outcome_map): the same scores, 1, 0, 0.5, 0.5.
THEIR_WINNER = {"model_a": "model_a", "model_b": "model_b", "tie": "tie", "tie (bothbad)": "both_bad"}

# Ratings: both are the maximum of the same likelihood on the same battles, so they differ only by how
# far each optimiser stops from it and by our ridge (1e-3 on theta: under 0.001 points here). Measured:
# 0.0025 points at most (arena-rank's L-BFGS stops when the loss changes by less than 1e-9, relatively).
# 0.1 points leaves room for another CPU's floating point and is still 1/10 of the integer the board
# shows and under 1/100 of an interval's half-width, while a real difference in method moves ratings by
# points: on these battles, leaving out the 186 both-bad ties on arena-rank's side moves them by up to
# 5.4 points, leaving out every tie by 26, reading its scale as 400 points per factor e by 171.
RATING_TOLERANCE = 0.1
# Interval widths: ours are quantiles of 200 bootstrap rounds. The 2.5% quantile of 200 draws has a
# standard error of sqrt(0.025 * 0.975 / 200) / phi(1.96) = 0.19 standard deviations, so the width
# (3.92 sd) is known to about 0.19 * sqrt(2) / 3.92 = 7%. Per model the ratio (ours / arena-rank's)
# must lie within 0.8-1.25, about three such errors either way; its mean over the nine ranked models,
# whose errors partly average out, within 0.93-1.07. Measured: 0.89-1.11 per model, 0.999 on average.
# A method error fails it: arena-rank's 90% intervals in place of its 95% ones give 1.06-1.32 (mean
# 1.19), leaving out every tie on its side 0.74-0.93 (mean 0.83), its scale read per factor e 0.43.
WIDTH_RATIO_PER_MODEL = (0.8, 1.25)
WIDTH_RATIO_MEAN = (0.93, 1.07)


def arena_rank_python() -> Path:
    python = VENV / "bin" / "python"
    if not (VENV / ".installed").exists() or not python.exists():
        pytest.skip(
            f"arena-rank is not installed in {VENV.name}: scripts/install-arena-rank.sh (run by `make test`) "
            "makes it, except where ARENA_RANK=0 or the base Python is older than 3.11"
        )
    return python


def arena_rank(python: Path, battles: pd.DataFrame, tmp_path: Path) -> tuple[pd.DataFrame, int]:
    """arena-rank's ratings and intervals of these battles (columns rating, lower, upper, one row per
    model), and how many battles it fitted."""
    source, out = tmp_path / "battles.json", tmp_path / "arena-rank.json"
    rows = [
        {"model_a": a, "model_b": b, "winner": THEIR_WINNER[w]}
        for a, b, w in battles[["model_a", "model_b", "winner"]].itertuples(index=False)
    ]
    source.write_text(json.dumps(rows))
    result = subprocess.run(
        [str(python), str(RUNNER), str(source), str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    fitted = json.loads(out.read_text())
    assert (fitted["scale"], fitted["base"], fitted["init_rating"]) == (400.0, 10.0, 1000.0)
    table = pd.DataFrame(
        {"rating": fitted["ratings"], "lower": fitted["lower"], "upper": fitted["upper"]}, index=fitted["competitors"]
    )
    return table, fitted["battles"]


def centred(rating: pd.Series, ranked: list[str]) -> pd.Series:
    """The ratings with the ranked models' mean at 1000."""
    return rating - rating[ranked].mean() + 1000.0


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    python = arena_rank_python()  # skips before the simulation where there is no arena-rank
    logs = tmp_path_factory.mktemp("arena-rank-logs")
    simulate(logs, 5000)
    board = board_from_logs(logs, BoardOptions(rounds=200))
    ours = board.table.set_index("model")
    theirs, fitted = arena_rank(python, board.counted, tmp_path_factory.mktemp("arena-rank"))
    assert sorted(theirs.index) == sorted(ours.index)
    assert fitted == len(board.counted)  # the same battles, every one
    ranked = list(ours.index[~ours["preliminary"].astype(bool)])
    assert len(ranked) == 9 and "rare-1b" not in ranked
    return ours, theirs, ranked


@pytest.mark.timeout(600)
def test_ratings_agree_with_arena_rank(both) -> None:
    ours, theirs, ranked = both
    gap = (centred(ours["rating"], ranked) - centred(theirs["rating"], ranked))[ranked].abs()
    assert gap.max() < RATING_TOLERANCE, f"ratings differ from arena-rank's by up to {gap.max():.4f}:\n{gap}"
    assert ours["rating"].idxmin() == theirs["rating"].idxmin() == "rare-1b"


@pytest.mark.timeout(600)
def test_interval_widths_agree_with_arena_rank(both) -> None:
    ours, theirs, ranked = both
    ratio = ((ours["upper"] - ours["lower"]) / (theirs["upper"] - theirs["lower"]))[ranked]
    assert ratio.notna().all() and all(math.isfinite(r) for r in ratio)
    low, high = WIDTH_RATIO_PER_MODEL
    assert ratio.between(low, high).all(), f"interval widths / arena-rank's:\n{ratio}"
    low, high = WIDTH_RATIO_MEAN
    assert low < ratio.mean() < high, f"mean width ratio {ratio.mean():.3f}:\n{ratio}"
