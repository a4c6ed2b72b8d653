"""The decision layer's goals (issue 36) on simulated battles with known true ratings:
`python -m bench.votes.decisions`.

    python -m bench.votes.decisions [--seeds 100] [--battles 2000] [--rounds 100]

1. **"Is B better than A?"** (`webui.leaderboard.stats.compare`): for each seed, battles among the
   simulator's nine models (`simulate.TRUE`, no ties, so that the true difference is the one a
   Bradley-Terry fit estimates), the board's ratings, and the comparison of each neighbouring pair
   of the true order; the figure is how often the 95% interval holds the true difference
   (goal: 95% of seeds, within 2 points).
2. **Best of k** (`webui.leaderboard.stats.families`): four variants of one family among five other
   models; how often the warning fires when the four are equally good (goal: it fires), and when
   one is truly better by 150 points (goal: quiet where the intervals resolve it).
Figures, never asserts (tests/unit/leaderboard/stats/test_leaderboard_families.py and test_leaderboard_compare.py
check the rules on hand-made cases).
"""

from __future__ import annotations

import argparse
import itertools
import json
from typing import Any

import numpy as np
import pandas as pd

from bench.report import load_average, machine_info

VARIANTS = ("v-1", "v-2", "v-3", "v-4")
OTHERS = {"o-1": 1100.0, "o-2": 1050.0, "o-3": 950.0, "o-4": 900.0, "o-5": 1000.0}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.votes.decisions", description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=100)
    parser.add_argument("--battles", type=int, default=2000, help="battles per simulated board")
    parser.add_argument("--rounds", type=int, default=100, help="bootstrap rounds of each fit")
    args = parser.parse_args(argv)
    result = {
        "meta": {**machine_info("cpu"), "load_average": load_average(), **vars(args)},
        "compare": compare_coverage(args),
        "best_of_k": {
            "equal": best_of_k(args, lead=0.0),
            "one better by 150": best_of_k(args, lead=150.0),
        },
    }
    print(json.dumps(result, indent=2))
    return 0


def _battles(seed: int, truth: dict[str, float], count: int, tie_share: float) -> pd.DataFrame:
    from webui.leaderboard.simulate_battles import bt_battles

    models = list(truth)
    rows = bt_battles(np.random.default_rng(seed), models, np.array([truth[m] for m in models]), count, tie_share)
    return pd.DataFrame(rows, columns=["model_a", "model_b", "winner"])


def compare_coverage(args: argparse.Namespace) -> dict[str, Any]:
    from webui.leaderboard.simulate import TRUE
    from webui.leaderboard.stats.bradley_terry import bradley_terry
    from webui.leaderboard.stats.compare import compare

    order = sorted(TRUE, key=TRUE.get)
    pairs = [(a, b) for a, b in itertools.pairwise(order) if TRUE[a] != TRUE[b]]
    held = total = 0
    for seed in range(args.seeds):
        battles = _battles(seed, TRUE, args.battles, tie_share=0.0)
        ratings = bradley_terry(battles)
        for a, b in pairs:
            found = compare(battles, ratings, a, b, args.rounds, seed)
            held += found.lower <= TRUE[b] - TRUE[a] <= found.upper
            total += 1
    return {"pairs_per_seed": len(pairs), "comparisons": total, "interval_holds_truth": held / total}


def best_of_k(args: argparse.Namespace, lead: float) -> dict[str, Any]:
    from webui.leaderboard.stats.bradley_terry import bootstrap_bt, bradley_terry, intervals
    from webui.leaderboard.stats.families import family_notes

    truth = {**dict.fromkeys(VARIANTS, 1000.0), **OTHERS}
    truth[VARIANTS[0]] += lead
    fired = best_was_truly_best = 0
    for seed in range(args.seeds):
        battles = _battles(seed, truth, args.battles, tie_share=0.15)
        ratings = bradley_terry(battles)
        table = intervals(bootstrap_bt(battles, args.rounds, seed)).assign(rating=ratings)
        table = table.rename_axis("model").reset_index().sort_values("rating", ascending=False)
        notes = family_notes(table, ("v-",))
        fired += bool(notes)
        family = table[table["model"].str.startswith("v-")]
        best_was_truly_best += family.iloc[0]["model"] == VARIANTS[0]
    return {
        "seeds": args.seeds,
        "warning_fired": fired / args.seeds,
        "top_variant_is_v1": best_was_truly_best / args.seeds,
    }


if __name__ == "__main__":
    raise SystemExit(main())
