"""Fits arena-rank's Bradley-Terry model to battles and writes its ratings and 95% intervals as JSON.

Runs inside .venv-arena-rank (scripts/install-arena-rank.sh), never in the app's environment:

    .venv-arena-rank/bin/python tests/arena_rank_runner.py BATTLES.json OUT.json

BATTLES.json: a list of {"model_a", "model_b", "winner"} with winner in arena-rank's own words
("model_a", "model_b", "tie", "both_bad"). OUT.json: {"competitors", "ratings", "lower", "upper",
"variances", "battles", "scale", "base", "init_rating"}: lists in the order of "competitors", battles
how many it fitted, all on arena-rank's scale (rating = init_rating + scale / ln(base) * log-odds
strength; its defaults are used).
Nothing from webui is imported here: this file must run where only arena-rank is installed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
from arena_rank.models.bradley_terry import BradleyTerry
from arena_rank.utils.data_utils import PairDataset, default_outcome_map

# The winners default_outcome_map knows (model_a 1.0, model_b 0.0, tie and both_bad 0.5). It maps any
# other word to 0.5 without a word of warning, so an unknown one is an error here, not a silent tie.
KNOWN = ("model_a", "model_b", "tie", "both_bad")


def fit(battles: list[dict]) -> dict:
    frame = pd.DataFrame(battles, columns=["model_a", "model_b", "winner"])
    unknown = sorted(set(frame["winner"]) - set(KNOWN))
    if unknown:
        raise SystemExit(f"winners arena-rank does not know: {unknown}")
    dataset = PairDataset.from_pandas(frame, outcome_map=default_outcome_map)  # unweighted: reweighted=False
    model = BradleyTerry(n_competitors=dataset.n_competitors)
    result = model.compute_ratings_and_cis(dataset, significance_level=0.05, ci_method="sandwich")
    return {
        "competitors": list(result["competitors"]),
        "ratings": [float(x) for x in result["ratings"]],
        "lower": [float(x) for x in result["rating_lower"]],
        "upper": [float(x) for x in result["rating_upper"]],
        "variances": [float(x) for x in result["variances"]],
        "battles": int(sum(dataset.counts)),
        "scale": model.scale,
        "base": model.base,
        "init_rating": model.init_rating,
    }


def main(argv: list[str]) -> int:
    battles_file, out_file = map(Path, argv)
    out = fit(json.loads(battles_file.read_text()))
    out_file.write_text(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
