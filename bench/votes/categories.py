"""Shrunk category boards against the category's own fit, on simulated categories with true ratings
of their own: `python -m bench.votes.categories`.

    python -m bench.votes.categories [--sizes 40,100,200] [--seeds 5] [--categories 3] [--prior-sd 50]

For each size (battles per category) and seed: `webui.leaderboard.simulate_battles.category_battles` (nine
models, 4,000 battles outside the categories, each category's true ratings the overall ones plus a
normal difference of sd 40), the overall board, and each category's board, own and shrunk
(`webui.leaderboard.stats.shrink`). The figure is the root-mean-square error against the true
category ratings, both centred on their mean (a Bradley-Terry fit fixes only differences), averaged
over the categories and seeds, and in how many categories the shrunk board was the nearer.
Figures, never asserts (tests/unit/leaderboard/votes/test_declared_categories.py asserts the direction).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import numpy as np
import pandas as pd

from bench.report import load_average, machine_info


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.votes.categories", description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="40,100,200", help="battles per category, comma-separated")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--categories", type=int, default=3, help="categories per seed")
    parser.add_argument("--prior-sd", type=float, default=50.0, help="the shrinkage prior's sd, Elo points")
    parser.add_argument("--rounds", type=int, default=50, help="bootstrap rounds of each fit")
    args = parser.parse_args(argv)
    rows = [measure(int(n), args) for n in args.sizes.split(",")]
    print(json.dumps({"meta": {**machine_info("cpu"), "load_average": load_average()}, "rows": rows}, indent=2))
    return 0


def measure(battles_per_category: int, args: argparse.Namespace) -> dict[str, Any]:
    from webui.leaderboard.simulate_battles import category_battles
    from webui.leaderboard.stats import ratings
    from webui.leaderboard.stats.shrink import SHRINK_COLUMNS, shrink

    own_errors, shrunk_errors = [], []
    for seed in range(args.seeds):
        battles, truth = category_battles(seed, [battles_per_category] * args.categories)
        overall = ratings.leaderboard(battles, rounds=args.rounds, min_battles=50)
        for name, true in truth.items():
            used = battles[battles[f"declared: {name}"]].reset_index(drop=True)
            own = ratings.leaderboard(used, rounds=args.rounds, min_battles=50)
            table = shrink(own, overall, args.prior_sd).set_index("model")
            target = pd.Series(true).reindex(table.index)
            for column, errors in ((SHRINK_COLUMNS[0], own_errors), ("rating", shrunk_errors)):
                gap = (table[column] - table[column].mean()) - (target - target.mean())
                errors.append(float(np.sqrt((gap**2).mean())))
    own, shrunk = np.array(own_errors), np.array(shrunk_errors)
    return {
        "battles_per_category": battles_per_category,
        "categories": len(own),
        "rmse_own": round(float(own.mean()), 1),
        "rmse_shrunk": round(float(shrunk.mean()), 1),
        "shrunk_nearer": int((shrunk < own).sum()),
        "prior_sd": args.prior_sd,
    }


if __name__ == "__main__":
    raise SystemExit(main())
