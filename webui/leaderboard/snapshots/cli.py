"""The command line's snapshot options: `--snapshot [DIR]`, `--diff A [B]`, `--diff-json FILE`.

    python -m webui.leaderboard LOGDIR --snapshot              # LOGDIR/snapshots/board-<UTC time>.json
    python -m webui.leaderboard LOGDIR --diff LOGDIR/snapshots # the newest snapshot there against now
    python -m webui.leaderboard --diff A.json B.json           # two snapshots, no board built

A snapshot argument is a snapshot file or a folder of them (its newest). Against the board now,
"now" is built with the options given, as the board printed is; a snapshot taken with other
options is compared all the same, with a warning naming them. Bad snapshots exit 2 with one line.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TextIO

from webui.leaderboard.board.build import Board
from webui.leaderboard.snapshots.changes import changes, changes_json, changes_lines
from webui.leaderboard.snapshots.snapshot import (
    FOLDER,
    Snapshot,
    SnapshotError,
    build_snapshot,
    code_version,
    load_snapshot,
    write_snapshot,
)

STDOUT = "-"
NEEDS_LOGDIR = ("csv", "over_time", "battles", "pairs", "category", "categories", "voters", "reindex")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    # `--snapshot` alone gives True (not a string, which argparse would turn into a Path): LOG_DIR/snapshots
    add(
        "--snapshot",
        metavar="DIR",
        nargs="?",
        const=True,
        type=Path,
        help=f"write the board and what it was built from to DIR/board-<UTC time>.json; DIR defaults to "
        f"LOG_DIR/{FOLDER}, where the tab looks",
    )
    add(
        "--diff",
        metavar="SNAPSHOT",
        nargs="+",
        type=Path,
        help="what moved between two snapshots (files, or folders: their newest), or, after LOG_DIR, "
        "between one snapshot and the board now",
    )
    add("--diff-json", metavar="FILE", help="write the --diff as JSON to FILE ('-': standard output)")


def check(args: argparse.Namespace) -> str | None:
    """What is wrong with the snapshot options (None: nothing), before anything is built."""
    diff = args.diff or []
    if len(diff) > 2:
        return "--diff takes one snapshot (with LOG_DIR: against the board now) or two"
    if args.log_dir is None:
        if args.snapshot:  # `--snapshot LOGDIR` reads LOGDIR as the snapshot folder
            return "give LOG_DIR first: python -m webui.leaderboard LOG_DIR --snapshot [DIR]"
        if len(diff) != 2:
            return "give LOG_DIR (the folder of the logs), or --diff with two snapshots"
        given = [f"--{name.replace('_', '-')}" for name in NEEDS_LOGDIR if getattr(args, name)]
        if given:
            return f"{', '.join(given)} {'needs' if len(given) == 1 else 'need'} LOG_DIR (a board to show)"
        return _unreadable(diff)
    if len(diff) == 2:
        return "with LOG_DIR, --diff takes one snapshot (the board now is the other); without it, two"
    if args.diff_json and not diff:
        return "--diff-json needs --diff"
    return _unreadable(diff)


def _unreadable(paths: list[Path]) -> str | None:
    """A bad snapshot is named before a board is built and printed (each is read again later:
    they are small)."""
    for path in paths:
        try:
            load_snapshot(path)
        except SnapshotError as exc:
            return str(exc)
    return None


def compare_snapshots(args: argparse.Namespace) -> int:
    """`--diff A B`: no board is built."""
    try:
        before, after = (load_snapshot(path) for path in args.diff)
    except SnapshotError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return _report(args, before, after, after_a_board=False)


def after_board(args: argparse.Namespace, board: Board) -> int:
    """After the board was printed: write its snapshot and compare it, as asked."""
    if not (args.snapshot or args.diff):
        return 0
    try:
        before = load_snapshot(args.diff[0]) if args.diff else None
    except SnapshotError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    now = build_snapshot(
        board, created=dt.datetime.now(dt.timezone.utc), code_version=code_version(), index_state=board.index_state
    )
    if args.snapshot:
        folder = args.log_dir / FOLDER if args.snapshot is True else args.snapshot
        try:
            path = write_snapshot(now, folder)
        except OSError as exc:
            print(f"error: the snapshot cannot be written to {folder} ({exc})", file=sys.stderr)
            return 1
        print(f"wrote {path} (a snapshot of the board: {now.battles} battles counted)", file=sys.stderr)
    return _report(args, before, now, after_a_board=True) if before is not None else 0


def _report(args: argparse.Namespace, before: Snapshot, after: Snapshot, *, after_a_board: bool) -> int:
    """The changes as text (on stderr when the JSON goes to stdout), and as JSON when asked."""
    found = changes(before, after)
    out: TextIO = sys.stderr if args.diff_json == STDOUT else sys.stdout
    say: Callable[..., None] = partial(print, file=out)
    if after_a_board:
        say("")
    for line in changes_lines(found):
        say(line)
    if not args.diff_json:
        return 0
    text = json.dumps(changes_json(found), indent=1, ensure_ascii=False, allow_nan=False) + "\n"
    if args.diff_json == STDOUT:
        sys.stdout.write(text)
        sys.stdout.flush()
        return 0
    path = Path(args.diff_json)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {path} (the differences as JSON)", file=sys.stderr)
    return 0
