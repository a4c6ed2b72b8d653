"""Board snapshots and their differences: the round trip, what a difference names (models, pairs,
days) on a simulated log before and after more votes, every new view of the command line
(`--snapshot`, `--diff`, `--diff-json`), bad snapshots (exit 2, one line) and the tab's line."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import math
import shutil
import time
from pathlib import Path

import pandas as pd
import pytest

from tests.records import battle, vote
from webui.leaderboard.__main__ import main
from webui.leaderboard.board.build import Board, BoardOptions, board_from_battles, board_from_logs
from webui.leaderboard.board.view import LeaderboardView
from webui.leaderboard.simulate import simulate
from webui.leaderboard.snapshots.changes import changes, changes_lines, since_line
from webui.leaderboard.snapshots.snapshot import (
    FORMAT_VERSION,
    Entry,
    Snapshot,
    SnapshotError,
    battles_hash,
    build_snapshot,
    latest_snapshot,
    load_snapshot,
    to_json,
    write_snapshot,
)
from webui.records.privacy import IdentityPolicy
from webui.records.storage import JsonlRecorder, log_files

OPTIONS = BoardOptions(rounds=20, history_points=0)
THEN = dt.datetime(2026, 1, 3, tzinfo=dt.timezone.utc)
LATER = dt.datetime(2026, 1, 4, 12, 30, tzinfo=dt.timezone.utc)
NEW_DAY = "2026-01-03"  # the simulated log's third day: the votes added between the two snapshots


@pytest.fixture(scope="module")
def simulated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the first two days of a simulated log, all three days of it)."""
    full = tmp_path_factory.mktemp("full")
    simulate(full, battles=600, seed=1, days=3)
    first = tmp_path_factory.mktemp("first")
    for path in log_files(full)[:2]:
        shutil.copy(path, first / path.name)
    assert [p.name[:10] for p in log_files(full)][2:] == [NEW_DAY]
    return first, full


@pytest.fixture(scope="module")
def boards(simulated: tuple[Path, Path]) -> tuple[Board, Board]:
    return board_from_logs(simulated[0], OPTIONS), board_from_logs(simulated[1], OPTIONS)


@pytest.fixture(scope="module")
def snapshots(boards: tuple[Board, Board]) -> tuple[Snapshot, Snapshot]:
    before, after = boards
    return (
        build_snapshot(before, created=THEN, code_version="test", index_state=(0, 402)),
        build_snapshot(after, created=LATER, code_version="test"),
    )


def test_a_snapshot_round_trips_through_its_file(snapshots: tuple[Snapshot, Snapshot], tmp_path: Path):
    snap = snapshots[0]
    path = write_snapshot(snap, tmp_path / "snaps")
    assert path.name == "board-20260103T000000Z.json"
    back = load_snapshot(path)
    assert back == snap and to_json(back) == to_json(snap)
    rare = next(e for e in back.views["raw"] if e.model == "rare-1b")  # two battles, both lost: (-inf, x]
    assert rare.rank is None and rare.lower == -math.inf and math.isfinite(rare.upper)
    assert math.isnan(next(e for e in back.views["style"] if e.model == "rare-1b").lower)  # no style interval
    strict = json.loads(path.read_text(), parse_constant=lambda c: pytest.fail(f"not strict JSON: {c}"))
    assert strict["format_version"] == FORMAT_VERSION and strict["index"] == {"generation": 0, "last_row": 402}
    assert strict["settings"]["rounds"] == 20 and "history_points" not in strict["settings"]
    assert sum(strict["days"][i]["battles"] for i in range(2)) == snap.battles == sum(snap.pairs.values())
    again = write_snapshot(snap, tmp_path / "snaps")  # the same second: kept beside, never over it
    assert again.name == "board-20260103T000000Z-2.json" and load_snapshot(path) == snap
    assert latest_snapshot(tmp_path / "snaps") == again and load_snapshot(tmp_path / "snaps") == snap
    assert not [p for p in (tmp_path / "snaps").iterdir() if p.name.startswith(".")]  # no temporary left


def test_the_battles_hash_tells_the_counted_battles_apart(boards: tuple[Board, Board]):
    counted = boards[0].counted
    assert battles_hash(counted.copy()) == battles_hash(counted) != battles_hash(boards[1].counted)
    other = counted.copy()
    other.loc[3, "winner"] = "model_a" if other.loc[3, "winner"] != "model_a" else "model_b"
    assert battles_hash(other) != battles_hash(counted)
    swapped = counted.copy()
    swapped.loc[3, ["model_a", "model_b"]] = [counted.loc[3, "model_b"], counted.loc[3, "model_a"]]
    assert battles_hash(swapped) != battles_hash(counted)


def test_a_board_without_battles_has_empty_views_and_everyone_is_new(tmp_path: Path, boards: tuple[Board, Board]):
    empty = build_snapshot(board_from_logs(tmp_path, OPTIONS), created=THEN, code_version="test")
    assert dict(empty.views) == {"raw": (), "style": ()} and empty.battles == 0 and not empty.pairs
    assert load_snapshot(write_snapshot(empty, tmp_path / "snaps")) == empty
    found = changes(empty, build_snapshot(boards[0], created=LATER, code_version="test"))
    assert {c.kind for c in found.moved} == {"new"} and len(found.moved) == 2 * len(boards[0].table)
    assert found.battles_added == len(boards[0].counted)


def test_the_snapshot_holds_the_boards_views(boards: tuple[Board, Board], snapshots: tuple[Snapshot, Snapshot]):
    table, snap = boards[0].table.set_index("model"), snapshots[0]
    assert set(snap.views) == {"raw", "style"}
    for view, columns in {
        "raw": ("rating", "lower", "upper", "rank"),
        "style": ("style_rating", "style_lower", "style_upper", "style_rank"),
    }.items():
        assert [e.model for e in snap.views[view]] == list(table.index)
        for entry in snap.views[view]:
            row = table.loc[entry.model]
            assert entry.rating == row[columns[0]] and entry.battles == row["battles"]
            for value, column in ((entry.lower, columns[1]), (entry.upper, columns[2])):
                assert value == row[column] or (math.isnan(value) and pd.isna(row[column]))
            assert _same_rank(entry.rank if entry.rank is not None else pd.NA, row[columns[3]])
    assert snap.battles == len(boards[0].counted) and snap.votes_read == boards[0].votes_read


def test_a_difference_names_the_moved_models_and_the_added_battles(
    boards: tuple[Board, Board], snapshots: tuple[Snapshot, Snapshot]
):
    found = changes(*snapshots)
    old, new = (b.table.set_index("model") for b in boards)
    for view, (rating, rank) in {"raw": ("rating", "rank"), "style": ("style_rating", "style_rank")}.items():
        expected = {
            m
            for m in new.index
            if m not in old.index
            or abs(new.loc[m, rating] - old.loc[m, rating]) > 1
            or not _same_rank(new.loc[m, rank], old.loc[m, rank])
        }
        assert {c.model for c in found.moved if c.view == view} == expected
    assert found.battles_added == len(boards[1].counted) - len(boards[0].counted) > 0
    # every battle added is on the third day, and by pair they are that day's counted battles
    added = boards[1].counted[pd.to_datetime(boards[1].counted["tstamp"], unit="s").dt.strftime("%Y-%m-%d") == NEW_DAY]
    by_pair = added.apply(lambda r: tuple(sorted((r["model_a"], r["model_b"]))), axis=1).value_counts()
    assert dict(found.days) == {NEW_DAY: len(added)} == {NEW_DAY: found.battles_added}
    assert dict(found.pairs) == {pair: int(n) for pair, n in by_pair.items()}
    assert not found.settings
    text = "\n".join(changes_lines(found))
    assert "warning" not in text and f"{NEW_DAY}: +{len(added)}" in text
    moved = found.moved[0]
    assert f"{moved.model}: " in text and ("beyond its 95% interval" in text or "within its 95% interval" in text)


def test_new_and_gone_models_and_a_tab_line(tmp_path: Path):
    """By hand: a newcomer's five battles against weak show as a new model, a pair and a day."""
    rec = JsonlRecorder(tmp_path / "logs", IdentityPolicy("none"))
    for i in range(12):
        rec.vote(vote("leftvote" if i < 9 else "rightvote", battle("strong", "weak")))
    options = BoardOptions(rounds=10, min_battles=0)
    before = build_snapshot(board_from_logs(rec.log_dir, options), created=THEN, code_version="a")
    for _ in range(5):
        rec.vote(vote("leftvote", battle("newcomer", "weak")))
    after = build_snapshot(board_from_logs(rec.log_dir, options), created=LATER, code_version="b")
    found = changes(before, after)
    today = time.strftime("%Y-%m-%d", time.gmtime())
    assert [(c.view, c.model, c.kind) for c in found.moved if c.kind != "moved"] == [
        ("raw", "newcomer", "new"),
        ("style", "newcomer", "new"),
    ]
    assert dict(found.pairs) == {("newcomer", "weak"): 5} and dict(found.days) == {today: 5}
    assert "note: built by different code (a → b)" in changes_lines(found)
    line = since_line(found)
    assert (
        line.startswith("Changes since the last snapshot (2026-01-03 00:00 UTC): newcomer new") and "+5 battles" in line
    )
    gone = changes(after, before)  # the other way round: the newcomer is gone, five battles fewer
    assert ("raw", "newcomer", "gone") in [(c.view, c.model, c.kind) for c in gone.moved]
    assert dict(gone.pairs) == {("newcomer", "weak"): -5} and "newcomer gone" in since_line(gone)


def _hand_made(entries: list[Entry], battles: int) -> Snapshot:
    return Snapshot(
        created="2026-01-03T00:00:00Z",
        code_version="test",
        settings={"rounds": 20},
        votes_read=battles,
        battles=battles,
        battles_sha256=str(battles),
        index=None,
        views={"raw": tuple(entries)},
        pairs={},
        days={},
    )


def test_what_counts_as_moved_and_how_the_move_is_told():
    """Reported: a changed rank, or a rating moved by more than one point, told as within or
    beyond the old 95% interval; the tab names models new or gone first, then rank moves, then
    the largest rating moves."""
    before = _hand_made(
        [
            Entry("a", 1100.0, 1090.0, 1110.0, 1, 90),
            Entry("b", 1000.0, 990.0, 1010.0, 2, 90),
            Entry("c", 990.0, 980.0, 1000.0, 2, 90),
            Entry("d", 900.0, -math.inf, 950.0, None, 3),
        ],
        140,
    )
    after = _hand_made(
        [
            Entry("a", 1100.9, 1091.0, 1110.0, 1, 95),
            Entry("b", 1011.5, 1001.0, 1020.0, 2, 95),
            Entry("c", 993.0, 985.0, 1001.0, 2, 95),
            Entry("e", 950.0, 900.0, 1000.0, 3, 60),
            Entry("d", 880.0, 840.0, 930.0, 4, 60),
        ],
        200,
    )
    found = changes(before, after)
    assert [(c.model, c.kind) for c in found.moved] == [("b", "moved"), ("c", "moved"), ("e", "new"), ("d", "moved")]
    lines = changes_lines(found)
    assert "  b: rating 1000.0 → 1011.5 (+11.5, beyond its 95% interval 990.0 to 1010.0)" in lines
    assert "  c: rating 990.0 → 993.0 (+3.0, within its 95% interval 980.0 to 1000.0)" in lines
    assert "  d: rank — → 4, rating 900.0 → 880.0 (-20.0, within its 95% interval −∞ to 950.0)" in lines
    assert "  e: new (rank 3, rating 950.0, 60 battles)" in lines
    assert since_line(found) == (
        "Changes since the last snapshot (2026-01-03 00:00 UTC): e new, d ranked (4), "
        "b +12 points, c +3 points; +60 battles."
    )


def _same_rank(a: object, b: object) -> bool:
    return bool(pd.isna(a) and pd.isna(b)) or (not pd.isna(a) and not pd.isna(b) and a == b)


def test_other_settings_are_named_in_a_warning(boards: tuple[Board, Board], snapshots: tuple[Snapshot, Snapshot]):
    other_board = board_from_battles(boards[1].battles, dataclasses.replace(OPTIONS, rounds=0))
    other = build_snapshot(other_board, created=LATER, code_version="test")
    found = changes(snapshots[0], other)
    assert dict(found.settings) == {"rounds": (20, 0)}
    assert changes_lines(found)[2] == (
        "warning: built with different settings (rounds: 20 → 0): the differences are not only from votes"
    )
    assert "(The snapshot was built with other settings: rounds.)" in since_line(found)


def test_registry_names_differ_only_where_no_board_has_the_model(snapshots: tuple[Snapshot, Snapshot]):
    """The app passes its registry's names, the command line none: names with battles are identity
    words either way, so only a name neither board rates makes the settings differ."""
    before, after = snapshots
    with_names = {**after.settings, "model_names": ["ember-7b", "late-7b"]}
    assert not changes(before, _with(after, settings=with_names)).settings
    with_ghost = {**after.settings, "model_names": ["ember-7b", "ghost-1b"]}
    assert set(changes(before, _with(after, settings=with_ghost)).settings) == {"model_names"}


def _with(snapshot: Snapshot, **fields: object) -> Snapshot:
    return dataclasses.replace(snapshot, **fields)  # type: ignore[arg-type]


# --- the command line -------------------------------------------------------------------------


def test_cli_snapshot_then_diff_against_now_and_between_files(
    simulated: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.chdir(tmp_path)
    logs = tmp_path / "logs"
    shutil.copytree(simulated[0], logs)
    assert main([str(logs), "--rounds", "10", "--snapshot"]) == 0
    err = capsys.readouterr().err
    first = latest_snapshot(logs / "snapshots")
    assert first is not None and f"wrote {first} (a snapshot of the board: " in err
    assert load_snapshot(first).index is not None and load_snapshot(first).code_version.startswith("0.")
    shutil.copy(simulated[1] / f"{NEW_DAY}-conv.json", logs)
    assert main([str(logs), "--rounds", "10", "--diff", str(logs / "snapshots"), "--snapshot", "snapshots"]) == 0
    out = capsys.readouterr().out
    assert out.index("Based on") < out.index("Changes from") < out.index("Ratings:") < out.index("Style-controlled")
    assert f"by day (UTC):\n    {NEW_DAY}: +" in out and "by pair:" in out and "warning" not in out
    second = latest_snapshot(tmp_path / "snapshots")  # a folder named: there, not beside the logs
    assert len(list((logs / "snapshots").iterdir())) == 1
    assert second is not None
    assert main(["--diff", str(first), str(second)]) == 0  # the board then was written as the second snapshot
    assert capsys.readouterr().out == out[out.index("Changes from") :]


def test_cli_diff_json_on_standard_output(
    simulated: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.chdir(tmp_path)
    before = board_from_logs(simulated[0], OPTIONS)
    write_snapshot(build_snapshot(before, created=THEN, code_version="test"), tmp_path / "snaps")
    assert main([str(simulated[1]), "--no-index", "--rounds", "20", "--diff", "snaps", "--diff-json", "-"]) == 0
    captured = capsys.readouterr()
    data = json.loads(captured.out)  # the JSON alone on stdout; the board and the text on stderr
    assert not (tmp_path / "-").exists()
    assert data["days"] == [{"day": NEW_DAY, "battles": data["battles_added"]}] and data["battles_added"] > 0
    assert {row["change"] for rows in data["views"].values() for row in rows} <= {"moved", "new", "gone"}
    assert sum(p["battles"] for p in data["pairs"]) == data["battles_added"]
    assert "Based on" in captured.err and "Changes from" in captured.err and data["settings_differ"] == {}
    assert main(["--diff", "snaps", "snaps", "--diff-json", str(tmp_path / "d.json")]) == 0
    same = json.loads((tmp_path / "d.json").read_text())
    assert same["views"] == {"raw": [], "style": []} and same["battles_added"] == 0 and same["pairs"] == []
    assert "both were built from the same counted battles" in capsys.readouterr().out


def _corrupt(folder: Path, good: dict) -> dict[str, tuple[Path, str]]:
    """Bad snapshots, each with what the error must say."""
    folder.mkdir()
    cases = {
        "missing": (folder / "nothing.json", "no such snapshot file"),
        "not JSON": (folder / "torn.json", "not a board snapshot (not JSON"),
        "not a snapshot": (folder / "other.json", 'not a board snapshot (no "format"'),
        "other version": (folder / "v9.json", "a snapshot of format version 9; this code reads version 1"),
        "a part missing": (folder / "part.json", "not a usable board snapshot (missing 'views')"),
        "a wrong type": (folder / "type.json", "not a usable board snapshot ('high' is not a number)"),
        "a bad time": (folder / "time.json", "not a usable board snapshot (time data 'yesterday' does not match"),
        "an empty folder": (folder / "empty", "no snapshots (board-*.json) in this folder"),
    }
    cases["not JSON"][0].write_text(json.dumps(good)[:200])
    cases["not a snapshot"][0].write_text(json.dumps({"model": "x"}))
    cases["other version"][0].write_text(json.dumps({**good, "format_version": 9}))
    cases["a part missing"][0].write_text(json.dumps({k: v for k, v in good.items() if k != "views"}))
    bad_rating = {**good, "views": {"raw": [{**good["views"]["raw"][0], "rating": "high"}]}}
    cases["a wrong type"][0].write_text(json.dumps(bad_rating))
    cases["a bad time"][0].write_text(json.dumps({**good, "created": "yesterday"}))
    cases["an empty folder"][0].mkdir()
    return cases


def test_bad_snapshots_exit_2_with_one_line(
    snapshots: tuple[Snapshot, Snapshot], simulated: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture
):
    good = write_snapshot(snapshots[0], tmp_path / "good")
    for what, (path, message) in _corrupt(tmp_path / "bad", to_json(snapshots[0])).items():
        for argv in (["--diff", str(good), str(path)], [str(simulated[0]), "--no-index", "--diff", str(path)]):
            assert main(argv) == 2, what
            captured = capsys.readouterr()
            assert captured.out == "", what  # refused before any board is printed
            assert captured.err.startswith(f"error: {path}: {message}") and captured.err.count("\n") == 1, what
        with pytest.raises(SnapshotError):
            load_snapshot(path)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--diff", "a.json", "b.json", "c.json"], "--diff takes one snapshot"),
        (["LOGS", "--diff", "a.json", "b.json"], "with LOG_DIR, --diff takes one snapshot"),
        (["LOGS", "--diff-json", "-"], "--diff-json needs --diff"),
        ([], "give LOG_DIR"),
        (["--diff", "a.json"], "give LOG_DIR"),
        (["--snapshot", "LOGS"], "give LOG_DIR first"),
        (["--diff", "a.json", "b.json", "--csv", "x.csv"], "--csv needs LOG_DIR"),
        (["--diff", "a.json", "b.json", "--voters", "--pairs", "-"], "--pairs, --voters need LOG_DIR"),
    ],
    ids=[
        "three",
        "two-with-logdir",
        "json-alone",
        "nothing",
        "one-alone",
        "logdir-after",
        "csv-without-logdir",
        "two-without-logdir",
    ],
)
def test_cli_refuses_option_mixes(
    argv: list[str], message: str, simulated: tuple[Path, Path], capsys: pytest.CaptureFixture
):
    argv = [str(simulated[0]) if a == "LOGS" else a for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1


# --- the tab ----------------------------------------------------------------------------------


def test_the_tab_shows_changes_since_the_last_snapshot(tmp_path: Path, capsys: pytest.CaptureFixture):
    rec = JsonlRecorder(tmp_path / "logs", IdentityPolicy("none"))
    for i in range(12):
        rec.vote(vote("leftvote" if i < 9 else "rightvote", battle("strong", "weak")))
    view = LeaderboardView(rec.log_dir, BoardOptions(rounds=10, min_battles=0))
    rec.vote_listeners.append(view.live.nudge)
    try:
        view.live.sync()
        assert "snapshot" not in view.outputs()[0]  # none taken: nothing said
        assert main([str(rec.log_dir), "--rounds", "10", "--min-battles", "0", "--snapshot"]) == 0
        taken = load_snapshot(rec.log_dir / "snapshots")
        when = taken.created.replace("T", " ")[:16]
        assert view.outputs()[0].endswith(
            f"\n\nChanges since the last snapshot ({when} UTC): no rank or rating moved; +0 battles."
        )
        for _ in range(5):
            rec.vote(vote("leftvote", battle("newcomer", "weak")))
        view.live.sync()
        summary = view.outputs()[0]
        assert f"Changes since the last snapshot ({when} UTC): newcomer new" in summary and "+5 battles." in summary
        assert "newcomer new" in view.outputs("multi-turn")[0]  # a category's summary says it too
        newest = rec.log_dir / "snapshots" / "board-29990101T000000Z.json"
        newest.write_text("{")
        view.live.sync()
        assert view.outputs()[0].endswith(
            "The last snapshot (board-29990101T000000Z.json) cannot be read: see the server's log."
        )
    finally:
        view.close()


def test_rank_ranges_are_kept_and_told_and_older_snapshots_still_load(
    snapshots: tuple[Snapshot, Snapshot], tmp_path: Path
):
    _, after = snapshots
    raw = after.views["raw"]
    assert any(e.rank_worst is not None and e.rank is not None and e.rank_worst > e.rank for e in raw)
    assert all(e.rank_worst is None for e in after.views.get("style", ()))  # style has no range (yet)
    path = tmp_path / "board-20260103T000000Z.json"
    path.write_text(json.dumps(to_json(after)))
    assert load_snapshot(path) == after
    older = to_json(after)  # as written before rank ranges: no rank_worst key at all
    for entries in older["views"].values():
        for entry in entries:
            entry.pop("rank_worst")
    path.write_text(json.dumps(older))
    assert all(e.rank_worst is None for e in load_snapshot(path).views["raw"])
    before = _hand_made([Entry("a", 1000.0, 990.0, 1010.0, 2, 90, 4)], 90)
    moved = _hand_made([Entry("a", 1030.0, 1020.0, 1040.0, 1, 120, 2)], 120)
    told = [line for line in changes_lines(changes(before, moved)) if line.startswith("  a: ")]
    assert told[0].startswith("  a: rank 2–4 → 1–2 (up 1), rating 1000.0 → 1030.0"), told
