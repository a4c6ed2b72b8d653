"""Board snapshots: the board as it stood and what it was built from, as one JSON file.

A snapshot is the board as it stood (each view's ratings, intervals and ranks) together with
what it was built from: the battle votes read and counted, a hash of the counted battles, the
vote index's state, the code version and the settings that shape the board; and the counted
battles by pair of models and by UTC day, so that a difference can say which new battles moved
things (webui.leaderboard.snapshots.changes). Guarantees:

- **Pure where it can be.** `build_snapshot`, `to_json` and `from_json` are functions of their
  arguments (the clock and the code version are passed in); only `write_snapshot`,
  `load_snapshot`, `latest_snapshot` and `code_version` touch the disk or a process.
- **Round trip.** `load_snapshot(write_snapshot(s, folder)) == s`: every float is written
  exactly, NaN as null and the infinite ends of a preliminary interval as "-inf" / "inf"
  (strict JSON, which other tools read).
- **Atomic, never overwritten.** A snapshot is written to a temporary file, fsync'ed, and linked
  to its name, so a reader sees a whole file or none, and two snapshots taken in one second
  both stay (the second gets `-2`).
- **Loud on bad input.** A missing file, one that is not a snapshot, or one of another format
  version raises `SnapshotError` with one line that names the file and what is wrong.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import math
import os
import re
import secrets
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

import webui
from webui.leaderboard.board.build import Board, BoardOptions, category_board
from webui.leaderboard.stats.categories import declared_names

FORMAT = "pairwise-arena/board-snapshot"
FORMAT_VERSION = 1
FOLDER = "snapshots"  # LOG_DIR/snapshots: where `--snapshot` writes by default and the tab looks
NAME = re.compile(r"^board-(\d{8}T\d{6}Z)(?:-(\d+))?\.json$")
STAMP = "%Y%m%dT%H%M%SZ"  # in file names
CREATED = "%Y-%m-%dT%H:%M:%SZ"  # in the document
UNSHAPING = ("history_points",)  # options that change what is printed, not the ratings


@dataclass(frozen=True)
class View:
    """One of the board's rankings: what texts call it and its table's columns."""

    label: str
    columns: tuple[str, str, str, str]  # rating, lower, upper, rank
    worst: str | None = None  # the worst rank the interval allows, where the view has one


RAW = View("Ratings", ("rating", "lower", "upper", "rank"), "rank_worst")
VIEWS = {  # the views a snapshot keeps, in the order texts show them (and CATEGORY_VIEW's)
    "raw": RAW,
    "style": View("Style-controlled ratings", ("style_rating", "style_lower", "style_upper", "style_rank")),
}


CATEGORY_VIEW = "category: "  # + a declared category's name: its board (shrunk) as a view of its own


def view_label(view: str) -> str:
    """How texts name a view: VIEWS' label, or the declared category's."""
    if view in VIEWS:
        return VIEWS[view].label
    return f"Category {view.removeprefix(CATEGORY_VIEW)!r} (declared; shrunk toward the overall board)"


def view_names(views: Mapping[str, Any]) -> list[str]:
    """The views of a snapshot in the order texts show them: VIEWS', then the declared categories'."""
    return [v for v in VIEWS if v in views] + [v for v in views if v.startswith(CATEGORY_VIEW)]


class SnapshotError(ValueError):
    """A snapshot that cannot be used; the message is one line naming the file."""


@dataclass(frozen=True)
class Entry:
    """One model in one view. NaN where the view has no value (no interval for a preliminary
    model under style control); an interval end the data cannot bound is infinite."""

    model: str
    rating: float
    lower: float
    upper: float
    rank: int | None  # None: preliminary, no rank
    battles: int
    rank_worst: int | None = None  # with `rank`, the ranks the interval allows (None: not kept, or older)


@dataclass(frozen=True)
class Snapshot:
    created: str  # UTC, ISO 8601 ("2026-11-26T17:00:00Z")
    code_version: str
    settings: Mapping[str, Any]  # the BoardOptions that shape the ratings
    votes_read: int
    battles: int  # counted
    battles_sha256: str  # of the counted battles (time, models, winner): equal hashes, equal input
    index: Mapping[str, int] | None  # the vote index's generation and last row; None without one
    views: Mapping[str, tuple[Entry, ...]]
    pairs: Mapping[tuple[str, str], int]  # counted battles per pair of models (names in order)
    days: Mapping[str, int]  # counted battles per UTC day

    def __eq__(self, other: object) -> bool:  # NaN == NaN here: a value that is absent in both
        return isinstance(other, Snapshot) and to_json(self) == to_json(other)

    __hash__ = None  # type: ignore[assignment]


def build_snapshot(
    board: Board, *, created: dt.datetime, code_version: str, index_state: tuple[int, int] | None = None
) -> Snapshot:
    """The snapshot of a built board. `index_state`: `VoteIndex.state()` when built from one."""
    table, counted = board.table, board.all_counted()
    views = {
        name: _entries(table, view.columns, view.worst)
        for name, view in VIEWS.items()
        if name != "style" or board.options.style
    }
    declared = declared_names(counted)
    for name in declared:  # each declared category's board, as the tab and --category show it
        views[CATEGORY_VIEW + name] = _entries(category_board(board, name)[0].table, RAW.columns, RAW.worst)
    settings = shaping_settings(board.options)
    if declared:  # kept only with declared categories, so that other snapshots compare with older ones alike
        settings.update(declared_categories=list(declared), category_prior_sd=board.options.category_prior_sd)
    pairs: dict[tuple[str, str], int] = {}
    for (a, b), n in counted.groupby(["model_a", "model_b"]).size().items():  # a few rows per pair, then folded
        key = (str(a), str(b)) if str(a) <= str(b) else (str(b), str(a))
        pairs[key] = pairs.get(key, 0) + int(n)
    day_numbers = (counted["tstamp"].astype(float) // 86_400).value_counts().sort_index()
    days = {_day(number): int(n) for number, n in day_numbers.items()}
    return Snapshot(
        created=created.astimezone(dt.timezone.utc).strftime(CREATED),
        code_version=code_version,
        settings=settings,
        votes_read=int(board.votes_read),
        battles=len(counted),
        battles_sha256=battles_hash(counted),
        index={"generation": index_state[0], "last_row": index_state[1]} if index_state else None,
        views=views,
        pairs=dict(sorted(pairs.items())),
        days=days,
    )


def _day(number: float) -> str:
    return (dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(days=int(number))).strftime("%Y-%m-%d")


def _entries(table: pd.DataFrame, columns: tuple[str, str, str, str], worst: str | None) -> tuple[Entry, ...]:
    rating, lower, upper, rank = columns
    if table.empty or rating not in table:  # no battles counted yet
        return ()
    return tuple(
        Entry(
            str(row["model"]),
            float(row[rating]),
            float(row[lower]),
            float(row[upper]),
            None if pd.isna(row[rank]) else int(row[rank]),
            int(row["battles"]),
            None if worst is None or worst not in row or pd.isna(row[worst]) else int(row[worst]),
        )
        for _, row in table.iterrows()
    )


def shaping_settings(options: BoardOptions) -> dict[str, Any]:
    settings = {k: v for k, v in dataclasses.asdict(options).items() if k not in UNSHAPING}
    settings.pop("category_prior_sd")  # shapes only the declared categories' views (build_snapshot)
    settings["model_names"] = sorted(settings["model_names"])
    # Kept only when set, so that snapshots from before fingerprints compare with today's alike.
    merged = sorted(settings.pop("merge_fingerprints"))
    if merged:
        settings["merge_fingerprints"] = merged
    return settings


def battles_hash(counted: pd.DataFrame) -> str:
    """SHA-256 over the counted battles' times, models and winners, in order. Text columns enter
    as their distinct values (in order of appearance) and a code per row: the same digest as the
    values themselves would give for telling boards apart, in a fraction of a second at a million."""
    digest = hashlib.sha256()
    if not counted.empty:
        digest.update(counted["tstamp"].to_numpy(dtype="float64").tobytes())
        for column in ("model_a", "model_b", "winner"):
            codes, uniques = pd.factorize(counted[column].astype(object), use_na_sentinel=True)
            digest.update(b"\x1e" + "\x1f".join(map(str, uniques)).encode("utf-8"))
            digest.update(codes.astype("<i4").tobytes())
    return digest.hexdigest()


def code_version() -> str:
    """The package version, and the git commit when this code runs from a git checkout (a local
    `git` call, no network); the version alone otherwise."""
    package = Path(webui.__file__).resolve().parent
    try:
        out = subprocess.run(
            ["git", "-C", str(package), "rev-parse", "--show-toplevel", "--short=12", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return webui.__version__
    if len(out) != 2 or Path(out[0]).resolve() != package.parent:  # another repository holds the install
        return webui.__version__
    return f"{webui.__version__}+g{out[1]}"


# --- JSON -------------------------------------------------------------------------------------


def to_json(snapshot: Snapshot) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "created": snapshot.created,
        "code_version": snapshot.code_version,
        "settings": dict(snapshot.settings),
        "votes_read": snapshot.votes_read,
        "battles": snapshot.battles,
        "battles_sha256": snapshot.battles_sha256,
        "index": dict(snapshot.index) if snapshot.index is not None else None,
        "views": {
            name: [
                {**dataclasses.asdict(e), **{k: json_number(getattr(e, k)) for k in ("rating", "lower", "upper")}}
                for e in entries
            ]
            for name, entries in snapshot.views.items()
        },
        "pairs": [{"model_a": a, "model_b": b, "battles": n} for (a, b), n in snapshot.pairs.items()],
        "days": [{"day": d, "battles": n} for d, n in snapshot.days.items()],
    }


def from_json(data: Any) -> Snapshot:
    """A snapshot document back: SnapshotError when it is not one or of another format version;
    KeyError, TypeError or ValueError when a part is missing or of the wrong type."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise SnapshotError(f'not a board snapshot (no "format": "{FORMAT}")')
    version = data.get("format_version")
    if version != FORMAT_VERSION:
        raise SnapshotError(
            f"a snapshot of format version {version}; this code reads version {FORMAT_VERSION} "
            "(take a new snapshot with this code)"
        )
    index = data["index"]
    dt.datetime.strptime(data["created"], CREATED)  # a ValueError unless a time written as we write it
    return Snapshot(
        created=str(data["created"]),
        code_version=str(data["code_version"]),
        settings=dict(data["settings"]),
        votes_read=int(data["votes_read"]),
        battles=int(data["battles"]),
        battles_sha256=str(data["battles_sha256"]),
        index={"generation": int(index["generation"]), "last_row": int(index["last_row"])} if index else None,
        views={
            str(name): tuple(
                Entry(
                    str(e["model"]),
                    _float(e["rating"]),
                    _float(e["lower"]),
                    _float(e["upper"]),
                    None if e["rank"] is None else int(e["rank"]),
                    int(e["battles"]),
                    None if e.get("rank_worst") is None else int(e["rank_worst"]),  # absent before rank ranges
                )
                for e in entries
            )
            for name, entries in data["views"].items()
        },
        pairs={(str(p["model_a"]), str(p["model_b"])): int(p["battles"]) for p in data["pairs"]},
        days={str(d["day"]): int(d["battles"]) for d in data["days"]},
    )


def json_number(value: float) -> float | str | None:
    """A float as strict JSON: NaN as null, the infinities as \"inf\" / \"-inf\"."""
    if math.isnan(value):
        return None
    return value if math.isfinite(value) else ("inf" if value > 0 else "-inf")


def _float(value: Any) -> float:
    if value is None:
        return math.nan
    if isinstance(value, str) and value in ("inf", "-inf"):
        return float(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{value!r} is not a number")
    return float(value)


# --- files ------------------------------------------------------------------------------------


def write_snapshot(snapshot: Snapshot, folder: Path) -> Path:
    """Write `folder/board-<created>.json` (`-2`, `-3`, ... when taken) atomically; its path."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    stamp = dt.datetime.strptime(snapshot.created, CREATED).strftime(STAMP)
    data = (json.dumps(to_json(snapshot), indent=1, allow_nan=False) + "\n").encode("utf-8")
    temporary = folder / f".board-{stamp}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        for n in range(1, 1000):
            path = folder / (f"board-{stamp}.json" if n == 1 else f"board-{stamp}-{n}.json")
            try:
                os.link(temporary, path)  # unlike a rename, never replaces a snapshot already there
            except FileExistsError:
                continue
            _fsync_dir(folder)
            return path
        raise FileExistsError(f"{folder}: a thousand snapshots stamped {stamp} already")
    finally:
        temporary.unlink(missing_ok=True)


def _fsync_dir(folder: Path) -> None:
    """Make the new name durable too; where a file system cannot, the snapshot is still whole."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def latest_snapshot(folder: Path) -> Path | None:
    """The newest snapshot in a folder by its name (None: none, or no such folder)."""
    try:
        found = [
            (m.group(1), int(m.group(2) or 1), p)
            for p in Path(folder).iterdir()
            if (m := NAME.match(p.name)) and p.is_file()
        ]
    except OSError:
        return None
    return max(found)[2] if found else None


def load_snapshot(path: Path) -> Snapshot:
    """The snapshot in a file, or the newest one in a folder of snapshots."""
    path = Path(path)
    if path.is_dir():
        newest = latest_snapshot(path)
        if newest is None:
            raise SnapshotError(f"{path}: no snapshots (board-*.json) in this folder")
        path = newest
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SnapshotError(f"{path}: no such snapshot file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SnapshotError(f"{path}: cannot be read ({exc})") from None
    try:
        return from_json(json.loads(text))
    except SnapshotError as exc:
        raise SnapshotError(f"{path}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise SnapshotError(f"{path}: not a board snapshot (not JSON: {exc})") from None
    except RecursionError:  # json reads nesting with the interpreter's stack: deeper is no snapshot of ours
        raise SnapshotError(f"{path}: not a board snapshot (nested too deeply to read)") from None
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise SnapshotError(f"{path}: not a usable board snapshot ({_reason(exc)})") from None


def _reason(exc: Exception) -> str:
    return f"missing {exc}" if isinstance(exc, KeyError) else str(exc)
