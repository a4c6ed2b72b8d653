"""`python -m webui.leaderboard LOGDIR`: print the leaderboard; optionally write CSV and exports.

Every file option takes `-` for standard output, as most command-line tools do; the report then
goes to standard error, so that what is piped on is the data alone.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any, TextIO

import pandas as pd

from webui.config import SERVER_NAME
from webui.db.store import StoreError, check_target
from webui.errors import ConfigError
from webui.leaderboard.board.build import (
    Board,
    BoardOptions,
    board_from_index,
    board_from_logs,
    category_board,
    merge_names,
    shrunk_text,
)
from webui.leaderboard.board.export import preference_pairs, write_jsonl, write_table
from webui.leaderboard.board.favours import FAVOUR_SHARE, favour_pair
from webui.leaderboard.snapshots import cli as snapshot_options
from webui.leaderboard.stats.compare import compare
from webui.leaderboard.stats.confidence import next_comparison
from webui.leaderboard.stats.families import family_notes, family_prefixes
from webui.leaderboard.stats.history import wide
from webui.leaderboard.stats.position import position_line, position_term
from webui.leaderboard.stats.shrink import PRIOR_SD
from webui.leaderboard.votes.declared import Declared, Membership
from webui.leaderboard.votes.declared import load as load_declared
from webui.leaderboard.votes.index import INDEX_NAME, VoteIndex
from webui.progress import Progress, size

PRINT = {"display.width": 250, "display.max_columns": 30, "display.max_colwidth": 60}
STDOUT = "-"
FILE_OPTIONS = ("csv", "over_time", "battles", "pairs", "diff_json")  # the options that write a file, or STDOUT
# Probabilities, small gains and sub-second times need more than the table's one decimal.
ROUNDING = {"p_above_next": 3, "gain_next": 5, "style_p_above_next": 3, "ttft_s": 2, "weight (own)": 2}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m webui.leaderboard",
        description="Leaderboard from Pairwise Arena (or FastChat) vote logs.",
        epilog="A FILE of '-' is standard output (CSV; JSON Lines for --battles and "
        "--pairs; JSON for --diff-json), and the report then goes to "
        "standard error.",
    )
    add = parser.add_argument
    add("log_dir", type=Path, nargs="?", help="folder holding YYYY-MM-DD-conv.json files")
    add("--rounds", type=int, default=200, help="bootstrap rounds for the 95%% intervals (0: none); default 200")
    add("--seed", type=int, default=0, help="bootstrap seed; default 0")
    add("--include-named", action="store_true", help="also count votes cast with the model names visible")
    add("--keep-stopped", action="store_true", help="keep battles where a reply was stopped early")
    add("--identity-words", default="", help="extra comma-separated words that disqualify a battle")
    add("--models", nargs="*", default=(), help="model names to treat as identity words (the logs' names are added)")
    add("--min-battles", type=int, default=50, help="fewer battles: preliminary, no rank; default 50")
    add("--votes-per-day", type=int, default=0, help="count at most N votes per voter per UTC day; default 0 (no cap)")
    add("--exclude-flagged", action="store_true", help="leave out voters flagged as anomalous")
    add("--no-style", action="store_true", help="skip the style-controlled ratings")
    add(
        "--merge-fingerprints",
        metavar="NAMES",
        default="",
        help="comma-separated model names rated as one row whatever served them (weights, engine, template); "
        "'*' for every model; default: a row per fingerprint where a name's changed",
    )
    add("--category", help="print the board of one category (see --categories), e.g. coding or 'language: English'")
    add("--categories", action="store_true", help="list the categories with their battle counts")
    add(
        "--categories-file",
        metavar="FILE",
        default="",
        help="categories you declare (YAML: a name and a rule each; docs/leaderboard.md): each is a category too, "
        "its board shrunk toward the overall board (as the arena's --categories-file)",
    )
    add(
        "--category-prior-sd",
        type=float,
        default=PRIOR_SD,
        metavar="SD",
        help=f"the normal prior (Elo points) each category's board (built-in or declared) is shrunk with; default {PRIOR_SD:g} "
        "(0: not shrunk)",
    )
    add("--voters", action="store_true", help="print the voter check (agreement with everyone else's ratings)")
    add("--over-time", metavar="FILE", help="write ratings over time to this CSV file ('-': standard output)")
    add("--over-time-points", type=int, default=20, help="cut points for --over-time; default 20")
    add("--csv", metavar="FILE", help="write the table to this CSV file ('-': standard output)")
    add("--index", type=Path, help=f"the vote index file; default LOG_DIR/{INDEX_NAME} (made or brought up to date)")
    add("--reindex", action="store_true", help="rebuild the vote index from the logs before printing")
    add("--no-index", action="store_true", help="read every log line instead of using (and writing) the vote index")
    add(
        "--database",
        metavar="URL",
        default="",
        help="the vote index shared by several servers, in PostgreSQL (postgresql://USER@HOST:PORT/DBNAME): "
        "LOG_DIR's files are indexed there as --server-name's, and the board holds every server's votes",
    )
    add("--server-name", default="", help="whose log folder LOG_DIR is, among the servers sharing --database")
    add(
        "--compare",
        nargs=2,
        metavar=("A", "B"),
        help="is B better than A? the probability, the difference with its interval, their head-to-head "
        "record and the battles that would settle it (two rows of the board)",
    )
    add(
        "--favour",
        nargs=2,
        metavar=("A", "B"),
        help="ask the arena serving LOG_DIR to favour battles between A and B (still blind, among others) "
        "until --favour-battles more have been counted",
    )
    add(
        "--favour-battles",
        type=int,
        default=100,
        metavar="N",
        help="how many more battles --favour asks for; default 100",
    )
    add(
        "--families",
        metavar="PREFIXES",
        default="",
        help="comma-separated name prefixes, each a family of variants: say when a family's top row is the best "
        "of several, and the lead that alone explains",
    )
    add("--battles", metavar="FILE", help="export every battle vote (.jsonl or .parquet)")
    add("--pairs", metavar="FILE", help="export preference pairs for DPO (.jsonl or .parquet)")
    snapshot_options.add_arguments(parser)
    return parser


def _check(args: argparse.Namespace) -> str | None:
    if not args.log_dir.is_dir():
        return f"{args.log_dir} is not a folder"
    for name in ("rounds", "min_battles", "votes_per_day", "over_time_points"):
        if getattr(args, name) < 0:
            return f"--{name.replace('_', '-')} must be 0 or more"
    if args.categories_file and args.no_index:
        return "--categories-file needs the vote index (its rows say where each vote's prompt is): drop --no-index"
    if not 0 <= args.category_prior_sd <= 1000:
        return "--category-prior-sd must be 0 (not shrunk) to 1000"
    if args.favour and (args.favour_battles < 1 or args.favour[0] == args.favour[1]):
        return "--favour needs two different models and --favour-battles of 1 or more"
    problem = _check_database(args)
    if problem:
        return problem
    on_stdout = [f"--{name.replace('_', '-')}" for name in FILE_OPTIONS if getattr(args, name) == STDOUT]
    if len(on_stdout) > 1:  # two tables run together on one stream cannot be read back apart
        return f"only one of {', '.join(on_stdout)} can be '-' (standard output)"
    return None


def _check_database(args: argparse.Namespace) -> str | None:
    if not args.database:
        return None
    if args.index or args.no_index:
        return "--database replaces --index and --no-index: give one of them"
    if not args.server_name or not SERVER_NAME.fullmatch(args.server_name):
        return (
            "--database needs --server-name NAME (letters, digits, '.', '_', '-'): the server whose logs LOG_DIR holds"
        )
    return check_target(args.database)


def options_from(args: argparse.Namespace) -> BoardOptions:
    return BoardOptions(
        rounds=args.rounds,
        seed=args.seed,
        include_named=args.include_named,
        drop_stopped=not args.keep_stopped,
        extra_identity_words=args.identity_words,
        model_names=tuple(args.models),
        min_battles=args.min_battles,
        votes_per_day=args.votes_per_day,
        exclude_flagged=args.exclude_flagged,
        style=not args.no_style,
        history_points=args.over_time_points if args.over_time else 0,
        merge_fingerprints=merge_names(args.merge_fingerprints),
        category_prior_sd=args.category_prior_sd,
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    problem = snapshot_options.check(args) or (_check(args) if args.log_dir is not None else None)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    if args.log_dir is None:  # --diff A B: two snapshots, no board to build
        return snapshot_options.compare_snapshots(args)
    try:
        declared = load_declared(args.categories_file)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        board = _board(args, options_from(args), declared)
    except StoreError as exc:  # the database cannot be reached or used: nothing was changed
        print(f"error: the vote index cannot be used: {exc}", file=sys.stderr)
        return 2
    except (OSError, sqlite3.Error) as exc:
        print(
            f"error: the vote index at {_index_path(args)} cannot be used ({exc}); "
            "pass --index PATH to keep it elsewhere, or --no-index",
            file=sys.stderr,
        )
        return 1
    problem = _unknown_rows(args, board)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    stdout_is_data = any(getattr(args, name) == STDOUT for name in FILE_OPTIONS)
    with pd.option_context(*[x for kv in PRINT.items() for x in kv]):
        try:
            _print_board(args, board, sys.stderr if stdout_is_data else sys.stdout)
            _write_outputs(args, board)
        except (OSError, ValueError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
    if args.favour:
        _favour(args, board)
    return snapshot_options.after_board(args, board)


def _favour(args: argparse.Namespace, board: Board) -> None:
    a, b = args.favour
    favour = favour_pair(args.log_dir, board.pair_counts, a, b, args.favour_battles)
    print(
        f"favoured {a} vs {b} for {args.favour_battles} more counted battles (until {favour.until} between them): "
        f"the arena serving {args.log_dir} draws the pair in about {FAVOUR_SHARE:.0%} of its battles meanwhile",
        file=sys.stderr,
    )


def _unknown_rows(args: argparse.Namespace, board: Board) -> str | None:
    """--compare and --favour name rows of the board: the first name that is not one."""
    rows = set(board.table["model"])
    for option in ("compare", "favour"):
        unknown = [name for name in getattr(args, option) or () if name not in rows]
        if unknown:
            return f"--{option}: no row {unknown[0]!r} on the board; rows: {', '.join(board.table['model'])}"
    return None


def _index_path(args: argparse.Namespace) -> Path:
    return args.index or args.log_dir / INDEX_NAME


def _board(args: argparse.Namespace, options: BoardOptions, declared: Declared) -> Board:
    """The board from the vote index (brought up to date first), or from every log line; its rows
    marked with the `declared` categories they are in."""
    if args.no_index:
        return board_from_logs(args.log_dir, options)
    index = VoteIndex(args.log_dir, _index_path(args), database=args.database, server=args.server_name)
    try:
        try:
            board = _indexed_board(args, index, options, declared)
        except sqlite3.DatabaseError as exc:  # damaged where opening it did not look: once more, anew
            if index.set_aside(exc) is None:
                raise
            board = _indexed_board(args, index, options, declared)
        if args.battles or args.pairs:  # exports carry the conversations: read back from their own lines
            text = index.details(board.battles)
            board.battles = pd.concat([board.battles, text], axis=1)
        return board
    finally:
        index.close()


def _indexed_board(args: argparse.Namespace, index: VoteIndex, options: BoardOptions, declared: Declared) -> Board:
    started = time.perf_counter()
    catch = index.reindex if args.reindex else index.catch_up
    with Progress("indexing votes", fmt=size) as progress:  # a bar on a terminal; nothing in a pipe
        report = catch(options.model_names, options.extra_identity_words, progress=progress)
    print(
        f"vote index {index.location}: {index.count()} battle votes, {report.votes} new, "
        f"{report.rechecked} identity checks redone ({time.perf_counter() - started:.1f} s)",
        file=sys.stderr,
    )
    # a judge's category labels (python -m webui.judge --label-categories) fill what no rule or tag places
    membership = Membership.with_labels(declared, index.log_dir) if declared else None
    return board_from_index(index, options, catch_up=False, membership=membership)


def _print_board(args: argparse.Namespace, board: Board, out: TextIO) -> None:
    say = partial(print, file=out)
    say(board.summary())
    if board.skipped_lines:
        say(f"({board.skipped_lines} log lines were torn or unreadable and were skipped)")
    table = board.table
    if args.category:
        rated, n = category_board(board, args.category)
        say(f"\nCategory {args.category!r}: {n} battles")
        shrunk = shrunk_text(rated, board.options)
        if shrunk:
            say(shrunk)
        table = rated.table
    if not table.empty:
        finer = {column: table[column].round(digits) for column, digits in ROUNDING.items() if column in table}
        if "fingerprint" in table:  # "-": votes that do not say what served them (older logs)
            finer["fingerprint"] = table["fingerprint"].replace("", "-")
        say(table.round(1).assign(**finer).to_string(index=False))
        line = next_comparison(table)
        if line:
            say(line)
        for note in family_notes(table, family_prefixes(args.families)):
            say(note.text())
    coefficients = board.rated.style_coefficients
    if not coefficients.empty:
        say(
            "\nStyle coefficients (log-odds per standard deviation of the A-B difference): "
            + ", ".join(f"{k} {v:+.3f}" for k, v in coefficients.items())
        )
    counted = board.all_counted()
    if len(counted):
        say("\n" + position_line(position_term(counted)))
    say("\nLeft out, by filter:")
    say(board.drops_table().to_string(index=False))
    _print_asked(args, board, say)


def _print_asked(args: argparse.Namespace, board: Board, say: Callable[..., None]) -> None:
    """What was asked for beyond the board: categories, the voter check, one comparison."""
    if args.categories:
        say("\nCategories:")
        say(board.categories.to_string(index=False))
    if args.compare:
        ratings = board.table.set_index("model")["rating"]
        a, b = args.compare
        say("")
        for line in compare(board.all_counted(), ratings, a, b, args.rounds, args.seed).lines():
            say(line)
    if args.voters:
        say(f"\nVoters checked ({len(board.voters)}; flagged: {len(board.flagged_voters())}):")
        say(board.voters.round(3).to_string(index=False) if not board.voters.empty else "(none with enough votes)")


def _write_outputs(args: argparse.Namespace, board: Board) -> None:
    if args.csv:
        _write(args.csv, board.table, "the table", _csv, _csv)
    if args.over_time:
        _write(args.over_time, wide(board.history), "ratings over time", _csv, _csv)
    if args.battles:
        _write(args.battles, board.battles, f"{len(board.battles)} battle votes", write_table, write_jsonl)
    if args.pairs:
        pairs = preference_pairs(_pair_source(board))
        _write(args.pairs, pairs, f"{len(pairs)} preference pairs", write_table, write_jsonl)


def _write(
    target: str,
    frame: pd.DataFrame,
    what: str,
    to_file: Callable[[pd.DataFrame, Path], Any],
    to_stream: Callable[[pd.DataFrame, TextIO], Any],
) -> None:
    """The one rule for every file option: STDOUT writes the data there and nothing else (in a text
    format: Parquet is for files); anything else is a file, its folder made, announced on stderr."""
    if target == STDOUT:
        to_stream(frame, sys.stdout)
        sys.stdout.flush()
        return
    path = Path(target)
    path.parent.mkdir(parents=True, exist_ok=True)
    to_file(frame, path)
    print(f"wrote {path} ({what})", file=sys.stderr)


def _csv(frame: pd.DataFrame, out: Path | TextIO) -> None:
    frame.to_csv(out, index=False)


def _pair_source(board: Board) -> pd.DataFrame:
    """Pairs come from every battle that passed hygiene, named or anonymous: both are preferences."""
    return board.battles[board.battles["drop_reason"].isna()]


if __name__ == "__main__":
    sys.exit(main())
