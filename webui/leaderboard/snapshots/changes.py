"""What changed between two board snapshots: ranks and ratings that moved, models new or gone,
and the battles added by pair of models and by day. Pure: snapshots in, values and text out.

A model is reported in a view when its rank changed or its rating moved by more than
`MOVE_POINTS`; each report says whether the new rating lies outside the old 95% interval (a move
the old board's own uncertainty does not explain) or within it. Battles are the counted ones, so
"added" is the difference of counts: negative where battles left (logs removed, other settings).
When the two snapshots were built with different settings, the differences are not only from
votes, and every text says so first.
"""

from __future__ import annotations

import datetime as dt
import itertools
import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from webui.leaderboard.board.build import Board
from webui.leaderboard.snapshots.snapshot import (
    Entry,
    Snapshot,
    SnapshotError,
    build_snapshot,
    json_number,
    load_snapshot,
    view_label,
    view_names,
)

log = logging.getLogger(__name__)

MOVE_POINTS = 1.0  # a rating that moved less (and kept its rank) is not reported
TAB_NAMES = 5  # models named in the tab's one line; the rest are counted
NOTHING_MOVED = f"(no rank changed and no rating moved by more than {MOVE_POINTS:g} point)"


@dataclass(frozen=True)
class Change:
    """One model in one view: it moved, is new (`before` None) or is gone (`after` None)."""

    view: str
    model: str
    before: Entry | None
    after: Entry | None

    @property
    def kind(self) -> str:
        return "new" if self.before is None else "gone" if self.after is None else "moved"

    @property
    def steps_up(self) -> int | None:
        """Ranks climbed (negative: fell); None unless ranked in both."""
        if self.before is None or self.after is None or self.before.rank is None or self.after.rank is None:
            return None
        return self.before.rank - self.after.rank

    @property
    def delta(self) -> float:
        if self.before is None or self.after is None:
            return math.nan
        return self.after.rating - self.before.rating

    @property
    def beyond_interval(self) -> bool:
        """The new rating lies outside the old 95% interval (False where there was none)."""
        if self.before is None or self.after is None or math.isnan(self.before.lower):
            return False
        return not self.before.lower <= self.after.rating <= self.before.upper


@dataclass(frozen=True)
class Changes:
    before: Snapshot
    after: Snapshot
    moved: tuple[Change, ...]  # by view, in the new board's order, then the models gone
    pairs: Mapping[tuple[str, str], int]  # counted battles added per pair (nonzero only)
    days: Mapping[str, int]  # and per UTC day
    settings: Mapping[str, tuple[Any, Any]]  # the settings that differ: (before, after)

    @property
    def battles_added(self) -> int:
        return self.after.battles - self.before.battles


def changes(before: Snapshot, after: Snapshot) -> Changes:
    moved = tuple(c for v in compared_views(before, after) for c in _view_changes(v, before.views[v], after.views[v]))
    days = dict(sorted(_added(before.days, after.days).items()))
    return Changes(before, after, moved, _added(before.pairs, after.pairs), days, _other_settings(before, after))


def newly_certain(found: Changes, view: str = "raw") -> list[tuple[str, str]]:
    """Neighbours on the new board (higher, lower) whose order became certain: their 95% intervals
    no longer overlap, where in the old board they did, or one of them was not ranked."""
    if view not in found.before.views or view not in found.after.views:
        return []
    old = {e.model: e for e in found.before.views[view]}
    ranked = [e for e in found.after.views[view] if e.rank is not None]
    return [
        (upper.model, lower.model)
        for upper, lower in itertools.pairwise(ranked)
        if _apart(upper, lower) and not _apart(old.get(upper.model), old.get(lower.model))
    ]


def _apart(upper: Entry | None, lower: Entry | None) -> bool:
    """`upper` is above `lower` beyond doubt: both ranked and their intervals apart."""
    if upper is None or lower is None or upper.rank is None or lower.rank is None:
        return False
    return upper.lower > lower.upper  # NaN compares False: no interval, no certainty


def compared_views(before: Snapshot, after: Snapshot) -> list[str]:
    """The views both snapshots have (one without: their settings differ, and the warning says so)."""
    return [v for v in view_names(after.views) if v in before.views]


def _other_settings(before: Snapshot, after: Snapshot) -> dict[str, tuple[Any, Any]]:
    """The settings that differ. The registry's model names only differ where neither board has
    the name among its models: a name in the logs is an identity word either way (the app passes
    its registry's names, the command line none unless `--models`)."""
    keys = sorted(before.settings.keys() | after.settings.keys())
    differ = {
        k: (before.settings.get(k), after.settings.get(k))
        for k in keys
        if before.settings.get(k) != after.settings.get(k)
    }
    if "model_names" in differ:
        seen = {e.model for s in (before, after) for entries in s.views.values() for e in entries}
        old, new = (set(names or ()) - seen for names in differ["model_names"])
        if old == new:
            del differ["model_names"]
    return differ


def _view_changes(view: str, before: tuple[Entry, ...], after: tuple[Entry, ...]) -> list[Change]:
    old = {e.model: e for e in before}
    new_models = {e.model for e in after}
    out = []
    for entry in after:
        was = old.get(entry.model)
        if was is None or was.rank != entry.rank or abs(entry.rating - was.rating) > MOVE_POINTS:
            out.append(Change(view, entry.model, was, entry))
    out += [Change(view, e.model, e, None) for e in before if e.model not in new_models]
    return out


def _added(before: Mapping[Any, int], after: Mapping[Any, int]) -> dict[Any, int]:
    added = {k: after.get(k, 0) - before.get(k, 0) for k in after.keys() | before.keys()}
    return {k: n for k, n in sorted(added.items(), key=lambda kv: (-abs(kv[1]), kv[0])) if n}


# --- text -------------------------------------------------------------------------------------


def _points(value: float) -> str:
    return "unrated" if math.isnan(value) else f"{value:.1f}"


def _end(value: float) -> str:
    return "−∞" if value == -math.inf else "+∞" if value == math.inf else f"{value:.1f}"


def _rank(entry: Entry) -> str:
    """ "3", or the ranks its interval allows ("2–4")."""  # noqa: RUF002
    if entry.rank is None:
        return "—"
    worst = entry.rank_worst
    return str(entry.rank) if worst is None or worst == entry.rank else f"{entry.rank}–{worst}"


def change_text(change: Change) -> str:
    """One line about one model, e.g. "granite-3-8b: rank 2 → 1 (up 1), rating 1110.2 → 1121.5
    (+11.3, beyond its 95% interval 1100.0 to 1119.0)"."""
    before, after = change.before, change.after
    if before is None and after is not None:
        return f"{change.model}: new (rank {_rank(after)}, rating {_points(after.rating)}, {after.battles} battles)"
    if after is None and before is not None:
        return f"{change.model}: gone (was rank {_rank(before)}, rating {_points(before.rating)})"
    assert before is not None and after is not None
    parts = []
    if before.rank != after.rank:
        steps = change.steps_up
        direction = "" if steps is None else f" (up {steps})" if steps > 0 else f" (down {-steps})"
        parts.append(f"rank {_rank(before)} → {_rank(after)}{direction}")
    where = (
        "no interval before"
        if math.isnan(before.lower)
        else f"{'beyond' if change.beyond_interval else 'within'} its 95% interval {_end(before.lower)} to {_end(before.upper)}"
    )
    parts.append(f"rating {_points(before.rating)} → {_points(after.rating)} ({change.delta:+.1f}, {where})")
    return f"{change.model}: " + ", ".join(parts)


def _label(snapshot: Snapshot) -> str:
    return f"{snapshot.created} ({snapshot.battles:,} battles counted, {snapshot.votes_read:,} battle votes read)"


def changes_lines(found: Changes) -> list[str]:
    """The report `--diff` prints."""
    lines = [f"Changes from {_label(found.before)}", f"          to {_label(found.after)}"]
    lines += _warnings(found)
    for view in compared_views(found.before, found.after):
        mine = [change_text(c) for c in found.moved if c.view == view] or [NOTHING_MOVED]
        lines += [f"\n{view_label(view)}:", *(f"  {line}" for line in mine)]
    lines.append(
        f"\nBattles added: {found.battles_added:+,} counted "
        f"({found.after.votes_read - found.before.votes_read:+,} battle votes read)"
    )
    if found.pairs:
        lines += ["  by pair:", *(f"    {a} vs {b}: {n:+,}" for (a, b), n in found.pairs.items())]
    if found.days:
        lines += ["  by day (UTC):", *(f"    {day}: {n:+,}" for day, n in found.days.items())]
    return lines


def _warnings(found: Changes) -> list[str]:
    out = []
    if found.settings:
        which = "; ".join(f"{k}: {_value(a)} → {_value(b)}" for k, (a, b) in found.settings.items())
        out.append(f"warning: built with different settings ({which}): the differences are not only from votes")
    if found.before.code_version != found.after.code_version:
        out.append(f"note: built by different code ({found.before.code_version} → {found.after.code_version})")
    if found.before.battles_sha256 == found.after.battles_sha256 and not found.settings:
        out.append("note: both were built from the same counted battles")
    return out


def _value(value: Any) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(map(str, value)) + "]"
    return repr(value) if isinstance(value, str) else str(value)


def changes_json(found: Changes) -> dict[str, Any]:
    """The same as JSON (strict: NaN as null, infinite interval ends as "-inf" / "inf")."""

    def side(s: Snapshot) -> dict[str, Any]:
        return {
            "created": s.created,
            "code_version": s.code_version,
            "battles": s.battles,
            "votes_read": s.votes_read,
            "battles_sha256": s.battles_sha256,
        }

    views: dict[str, list[dict[str, Any]]] = {v: [] for v in compared_views(found.before, found.after)}
    for c in found.moved:
        views.setdefault(c.view, []).append(
            {
                "model": c.model,
                "change": c.kind,
                "rank_before": c.before.rank if c.before else None,
                "rank_after": c.after.rank if c.after else None,
                "rank_worst_before": c.before.rank_worst if c.before else None,
                "rank_worst_after": c.after.rank_worst if c.after else None,
                "rating_before": json_number(c.before.rating) if c.before else None,
                "rating_after": json_number(c.after.rating) if c.after else None,
                "delta": json_number(c.delta),
                "beyond_interval": c.beyond_interval,
            }
        )
    return {
        "before": side(found.before),
        "after": side(found.after),
        "settings_differ": {k: [a, b] for k, (a, b) in found.settings.items()},
        "views": views,
        "battles_added": found.battles_added,
        "pairs": [{"model_a": a, "model_b": b, "battles": n} for (a, b), n in found.pairs.items()],
        "days": [{"day": d, "battles": n} for d, n in found.days.items()],
    }


def since_line(found: Changes) -> str:
    """The tab's one line about the ratings (raw view), e.g. "Changes since the last snapshot
    (2026-11-26 17:00 UTC): granite-3-8b up 1, late-7b new, falcon-7b -12 points; +350 battles."."""
    when = found.before.created.replace("T", " ").removesuffix("Z")[:16] + " UTC"
    raw = sorted((c for c in found.moved if c.view == "raw"), key=_weight)
    said = [_short(c) for c in raw[:TAB_NAMES]]
    if len(raw) > TAB_NAMES:
        said.append(f"{len(raw) - TAB_NAMES} more")
    what = ", ".join(said) if said else "no rank or rating moved"
    added = found.battles_added
    text = f"Changes since the last snapshot ({when}): {what}; {added:+,} battle{'' if abs(added) == 1 else 's'}."
    if found.settings:
        text += f" (The snapshot was built with other settings: {', '.join(found.settings)}.)"
    return text


def _weight(change: Change) -> tuple[int, float]:
    """The tab names models new or gone first, then rank moves, then the largest rating moves."""
    if change.kind != "moved":
        return 0, 0.0
    ranked = change.before is not None and change.after is not None and change.before.rank != change.after.rank
    return (1, -abs(change.steps_up or 0)) if ranked else (2, -abs(change.delta))


def _short(change: Change) -> str:
    before, after = change.before, change.after
    if before is None or after is None:
        return f"{change.model} {change.kind}"
    steps = change.steps_up
    if steps:
        return f"{change.model} {'up' if steps > 0 else 'down'} {abs(steps)}"
    if after.rank is not None and before.rank is None:
        return f"{change.model} ranked ({after.rank})"
    if before.rank is not None and after.rank is None:
        return f"{change.model} unranked"
    return f"{change.model} {change.delta:+.0f} points"


def since_snapshot(board: Board, path: Path, now: dt.datetime) -> str:
    """The tab's line about `board` against the snapshot at `path`; where that cannot be read, a
    line that says so (the reason goes to the log, not to visitors)."""
    try:
        before = load_snapshot(path)
    except SnapshotError as exc:
        log.warning("%s", exc)
        return f"The last snapshot ({path.name}) cannot be read: see the server's log."
    return since_line(changes(before, build_snapshot(board, created=now, code_version="")))
