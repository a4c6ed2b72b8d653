"""`python -m webui.leaderboard LOGDIR`: print the leaderboard; optionally write CSV and exports."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from webui.leaderboard.board import BoardOptions, board_from_logs
from webui.leaderboard.export import preference_pairs, write_table


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m webui.leaderboard",
                                     description="Leaderboard from Pairwise Arena (or FastChat) vote logs.")
    add = parser.add_argument
    add("log_dir", type=Path, help="folder holding YYYY-MM-DD-conv.json files")
    add("--rounds", type=int, default=200, help="bootstrap rounds for the 95%% intervals (0: none); default 200")
    add("--seed", type=int, default=0, help="bootstrap seed; default 0")
    add("--include-named", action="store_true", help="also count votes cast with the model names visible")
    add("--keep-stopped", action="store_true", help="keep battles where a reply was stopped early")
    add("--identity-words", default="", help="extra comma-separated words that disqualify a battle")
    add("--models", nargs="*", default=(), help="model names to treat as identity words (the logs' names are added)")
    add("--csv", type=Path, help="write the table to this CSV file")
    add("--battles", type=Path, help="export every battle vote (.jsonl or .parquet)")
    add("--pairs", type=Path, help="export preference pairs for DPO (.jsonl or .parquet)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if not args.log_dir.is_dir():
        print(f"error: {args.log_dir} is not a folder", file=sys.stderr)
        return 2
    if args.rounds < 0:
        print("error: --rounds must be 0 or more", file=sys.stderr)
        return 2
    options = BoardOptions(rounds=args.rounds, seed=args.seed, include_named=args.include_named,
                           drop_stopped=not args.keep_stopped, extra_identity_words=args.identity_words,
                           model_names=tuple(args.models))
    board = board_from_logs(args.log_dir, options)
    print(board.summary())
    if board.skipped_lines:
        print(f"({board.skipped_lines} log lines were torn or unreadable and were skipped)")
    if not board.table.empty:
        with pd.option_context("display.width", 200, "display.max_columns", 20):
            print(board.table.round(1).to_string(index=False))
    try:
        _write_outputs(args, board)
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


def _write_outputs(args: argparse.Namespace, board) -> None:
    if args.csv:
        args.csv.parent.mkdir(parents=True, exist_ok=True)
        board.table.to_csv(args.csv, index=False)
        print(f"wrote {args.csv}")
    if args.battles:
        print(f"wrote {write_table(board.battles, args.battles)} ({len(board.battles)} battle votes)")
    if args.pairs:
        pairs = preference_pairs(_pair_source(board))
        print(f"wrote {write_table(pairs, args.pairs)} ({len(pairs)} preference pairs)")


def _pair_source(board) -> pd.DataFrame:
    """Pairs come from every battle that passed hygiene, named or anonymous: both are preferences."""
    return board.battles[board.battles["drop_reason"].isna()]


if __name__ == "__main__":
    sys.exit(main())
