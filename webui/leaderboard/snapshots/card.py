"""The dataset card (README.md) of the arena's results on the Hugging Face Hub.

Pure: a board, its snapshot and the names of the files pushed beside it in, Markdown out. The card
says how the ratings were made (Bradley-Terry, intervals, style control, the preliminary rule),
from what (votes read, battles counted, models, the date range of the counted battles), what each
filter left out and with which settings, and what each file holds. Its YAML header names the
exports as the dataset's configurations, so that the Hub's viewer and `datasets.load_dataset`
read the tables and not the raw logs beside them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from webui.leaderboard.board.build import Board
from webui.leaderboard.snapshots.snapshot import Snapshot

TOP_ROWS = 20  # leaderboard rows the card shows; the snapshot has them all


def _interval(lower: float, upper: float) -> str:
    if math.isnan(lower) or math.isnan(upper):
        return "—"
    end = {-math.inf: "−∞", math.inf: "+∞"}
    return f"{end.get(lower, f'{lower:.0f}')} to {end.get(upper, f'{upper:.0f}')}"


def dataset_card(board: Board, snapshot: Snapshot, files: Mapping[str, str], *, pairs: int | None = None) -> str:
    """README.md for the results dataset. `files`: path in the repository -> what it holds; the
    configurations are the exports among them (exports/*.parquet, exports/*.jsonl)."""
    options = board.options
    configs = [
        (path.rsplit("/", 1)[-1].split(".", 1)[0], path)
        for path in files
        if path.startswith("exports/") and path.endswith((".parquet", ".jsonl"))
    ]
    header = ["---", "pretty_name: Pairwise Arena results", "tags:", "- pairwise-arena", "- human-preferences"]
    header += ["- llm-evaluation", "configs:"]
    for name, path in configs:
        header += [f"- config_name: {name}", f"  data_files: {path}"]
    header.append("---")
    days = sorted(snapshot.days)
    span = f"{days[0]} to {days[-1]} (UTC)" if days else "no battles counted yet"
    ranked = snapshot.views.get("raw", ())
    lines = [
        "# Pairwise Arena results",
        "",
        f"Published by the arena at its scheduled snapshot of {snapshot.created} (code {snapshot.code_version}).",
        "",
        "## Counts",
        "",
        f"- Battle votes read: {snapshot.votes_read:,}",
        f"- Battles counted in the ratings: {snapshot.battles:,}",
        f"- Models rated: {len(ranked)}",
        f"- Dates of the counted battles: {span}",
    ]
    if pairs is not None:
        lines.append(f"- Preference pairs exported: {pairs:,}")
    lines += [
        "",
        "## Method",
        "",
        "Ratings are Bradley-Terry strengths fitted to the counted battles by maximum likelihood and shown on "
        "the Elo scale (400 points per factor of 10 in the odds, the ranked models' mean at 1000), either kind of "
        f"tie counted as half a win. The 95% intervals come from {options.rounds} bootstrap rounds (seed {options.seed}).",
        (
            f"A model with fewer than {options.min_battles} battles is preliminary: no rank, and a likelihood-ratio "
            "interval, which may be unbounded."
            if options.min_battles
            else "Every model is ranked, however few its battles."
        )
        + " A rank range is the ranks a model's interval allows.",
    ]
    if options.style:
        lines.append(
            "Style-controlled ratings hold the reply length and markdown equal (as lmarena publishes); "
            "they are in the snapshot's `style` view."
        )
    lines += ["", "## Filters", "", "| filter | left out | why |", "|---|---:|---|"]
    for row in board.drops_table().itertuples(index=False):
        lines.append(f"| {row[0]} | {int(row[1]):,} | {row[2]} |")
    lines += [
        "",
        f"Settings: anonymous battles only: {'no' if options.include_named else 'yes'}; "
        f"stopped replies left out: {'yes' if options.drop_stopped else 'no'}; "
        f"votes per voter per day: {options.votes_per_day or 'no cap'}; "
        f"flagged voters left out: {'yes' if options.exclude_flagged else 'no'}.",
        "",
        "## Leaderboard",
        "",
        "| rank | model | rating | 95% interval | battles |",
        "|---:|---|---:|---|---:|",
    ]
    for entry in ranked[:TOP_ROWS]:
        rank = "—" if entry.rank is None else str(entry.rank)
        if entry.rank is not None and entry.rank_worst not in (None, entry.rank):
            rank = f"{entry.rank}–{entry.rank_worst}"
        name = entry.model.replace("|", "\\|")
        lines.append(
            f"| {rank} | {name} | {entry.rating:.0f} | {_interval(entry.lower, entry.upper)} | {entry.battles:,} |"
        )
    if len(ranked) > TOP_ROWS:
        lines.append(f"\n{len(ranked) - TOP_ROWS} more models are in the snapshot.")
    lines += ["", "## Files", ""]
    lines += [f"- `{path}`: {what}" for path, what in files.items()]
    return "\n".join([*header, "", *lines]) + "\n"
