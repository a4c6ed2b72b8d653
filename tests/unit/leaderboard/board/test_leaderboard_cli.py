"""`python -m webui.leaderboard LOGDIR`, the exports, and the tab's handler logic (no server)."""

from __future__ import annotations

import dataclasses
import io
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.records import battle, chat_event, conversation, vote
from webui.leaderboard.__main__ import main
from webui.leaderboard.board.build import BoardOptions, board_from_logs
from webui.leaderboard.board.display import DISPLAY_COLUMNS, display_table
from webui.leaderboard.board.export import preference_pairs, write_table
from webui.leaderboard.board.view import LeaderboardView
from webui.records.privacy import IdentityPolicy
from webui.records.storage import JsonlRecorder
from webui.types import Finished, FinishReason


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    """Twelve anonymous battles (strong beats weak 9-3; strong is the slower), one named, one leaked,
    one multi-turn."""
    folder = tmp_path / "logs"
    rec = JsonlRecorder(folder, IdentityPolicy("none"))
    for i in range(12):
        left, right = battle("strong", "weak", (f"good answer {i}", f"poor answer {i}"), prompt=f"question {i}")
        for conv, ttft, rate in ((left, 1.5 + i / 100, 8.0 + i), (right, 0.2, 30.0)):  # medians 1.56, 13.5; 0.2, 30
            done = Finished(FinishReason.STOP, completion_tokens=9, ttft_s=ttft, tokens_per_s=rate)
            rec.chat(dataclasses.replace(chat_event(conv), finished=done))
        rec.vote(vote("leftvote" if i < 9 else "rightvote", (left, right)))
    rec.vote(vote("tievote", battle("strong", "weak", anonymous=False)))
    rec.vote(vote("leftvote", battle("strong", "weak", ("As Strong, I say", "hm"))))
    multi = [
        conversation(
            m,
            messages=[("user", "one"), ("assistant", first), ("user", "two"), ("assistant", r)],
            battle_id="mt",
            turn=2,
        )
        for m, first, r in (("strong", "a1", "x"), ("weak", "b1", "y"))
    ]  # each saw its own first answer
    rec.vote(vote("rightvote", multi))
    return folder


def test_cli_prints_the_table_and_writes_files(log_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture):
    out = tmp_path / "out"
    code = main(
        [
            str(log_dir),
            "--rounds",
            "50",
            "--csv",
            str(out / "board.csv"),
            "--battles",
            str(out / "battles.parquet"),
            "--pairs",
            str(out / "pairs.jsonl"),
        ]
    )
    printed = capsys.readouterr().out
    assert code == 0
    assert "Based on 13 battles between 2 models (15 battle votes read). Left out: 1 identity, 1 named" in printed
    table = pd.read_csv(out / "board.csv")
    assert list(table["model"]) == ["strong", "weak"] and list(table["battles"]) == [13, 13]
    battles = pd.read_parquet(out / "battles.parquet")
    assert len(battles) == 15 and battles["conversation_a"][0][0]["content"] == "question 0"
    assert (battles["ttft_s_a"][0], battles["tokens_per_s_b"][0]) == (1.5, 30.0)  # the judged replies' speeds
    pairs = [json.loads(line) for line in (out / "pairs.jsonl").read_text().splitlines()]
    assert len(pairs) == 12  # 12 decisive single-turn anonymous battles; tie, leak and multi-turn left out
    first = pairs[0]
    assert first["prompt"] == [{"role": "user", "content": "question 0"}]
    assert first["chosen"] == [{"role": "assistant", "content": "good answer 0"}]
    assert first["rejected"] == [{"role": "assistant", "content": "poor answer 0"}]
    assert (first["model_chosen"], first["model_rejected"]) == ("strong", "weak")


def test_cli_shows_rank_confidence_and_speed(log_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture):
    """With both models ranked: how sure their order is, the comparison to make next, and each
    model's median speed (strong wins on its answers while being the slower one)."""
    assert main([str(log_dir), "--rounds", "50", "--min-battles", "5", "--csv", str(tmp_path / "board.csv")]) == 0
    printed = capsys.readouterr().out.splitlines()
    header = next(line.split() for line in printed if line.split()[:2] == ["rank", "model"])
    rows = {
        line.split()[1]: dict(zip(header, line.split(), strict=True))
        for line in printed
        if line.split()[1:2] in (["strong"], ["weak"])
    }
    assert 0.5 < float(rows["strong"]["p_above_next"]) < 0.975 and int(float(rows["strong"]["more_battles_next"])) > 0
    assert rows["weak"]["p_above_next"] == "NaN"  # nobody ranked below it
    assert 0.5 < float(rows["strong"]["style_p_above_next"]) < 0.975  # in the style ranking's own order
    assert (rows["strong"]["ttft_s"], rows["strong"]["tokens_per_s"]) == ("1.56", "13.5")
    assert (rows["weak"]["ttft_s"], rows["weak"]["tokens_per_s"]) == ("0.20", "30.0")
    line = next(line for line in printed if line.startswith("Most useful next comparison: strong vs weak"))
    assert f"P(order right) = {float(rows['strong']['p_above_next']):.2f}" in line
    table = pd.read_csv(tmp_path / "board.csv").set_index("model")
    assert table.loc["strong", "ttft_s"] == pytest.approx(1.555) and table.loc["weak", "tokens_per_s"] == 30.0
    assert table.loc["strong", "p_above_next"] == pytest.approx(float(rows["strong"]["p_above_next"]), abs=5e-4)


def test_cli_counts_named_battles_when_asked(log_dir: Path, capsys: pytest.CaptureFixture):
    assert main([str(log_dir), "--rounds", "0", "--include-named"]) == 0
    assert "Based on 14 battles" in capsys.readouterr().out


def test_cli_refuses_bad_input(tmp_path: Path, log_dir: Path, capsys: pytest.CaptureFixture):
    assert main([str(tmp_path / "missing")]) == 2
    assert main([str(log_dir), "--rounds", "0", "--battles", str(tmp_path / "battles.csv")]) == 1
    assert ".jsonl or .parquet" in capsys.readouterr().err


def test_module_entry_point_runs(log_dir: Path):
    result = subprocess.run(
        [sys.executable, "-m", "webui.leaderboard", str(log_dir), "--rounds", "10"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "strong" in result.stdout and "rank" in result.stdout


def test_csv_dash_is_standard_output(log_dir: Path, tmp_path: Path):
    """`--csv -` writes the CSV to stdout, as `-` means to most tools: no file named '-' in the
    current folder, and nothing but the CSV on stdout (the report goes to stderr)."""
    result = subprocess.run(
        [sys.executable, "-m", "webui.leaderboard", str(log_dir), "--rounds", "0", "--csv", "-"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert not (tmp_path / "-").exists()
    table = pd.read_csv(io.StringIO(result.stdout))
    assert list(table["model"]) == ["strong", "weak"] and list(table["battles"]) == [13, 13]
    assert "Based on 13 battles" in result.stderr and "wrote" not in result.stderr


@pytest.mark.parametrize(
    ("option", "read", "rows"),
    [
        ("--over-time", pd.read_csv, None),
        ("--battles", lambda text: pd.read_json(text, lines=True), 15),
        ("--pairs", lambda text: pd.read_json(text, lines=True), 12),
    ],
    ids=["over-time", "battles", "pairs"],
)
def test_every_file_option_takes_dash_for_standard_output(
    option: str,
    read,
    rows: int | None,
    log_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture,
):
    """The same rule for every file option: the data alone on stdout (JSON Lines where the file
    would be .jsonl or .parquet), the report on stderr."""
    monkeypatch.chdir(tmp_path)
    assert main([str(log_dir), "--rounds", "0", option, "-"]) == 0
    captured = capsys.readouterr()
    assert not (tmp_path / "-").exists()
    data = read(io.StringIO(captured.out))
    if rows is None:  # ratings over time: one row per cut point, a "battles" column first
        assert data.columns[0] == "battles" and len(data) > 1
    else:
        assert len(data) == rows
    assert "Based on 13 battles" in captured.err


def test_written_files_are_announced_on_stderr(log_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture):
    assert main([str(log_dir), "--rounds", "0", "--csv", str(tmp_path / "board.csv")]) == 0
    captured = capsys.readouterr()
    assert f"wrote {tmp_path / 'board.csv'}" in captured.err and "wrote" not in captured.out


def test_only_one_file_option_can_take_standard_output(
    log_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
):
    monkeypatch.chdir(tmp_path)
    assert main([str(log_dir), "--rounds", "0", "--csv", "-", "--pairs", "-"]) == 2
    assert "only one of --csv, --pairs can be '-'" in capsys.readouterr().err


def test_pairs_need_the_same_prompt_on_both_sides():
    same = [{"role": "user", "content": "q"}]
    rows = pd.DataFrame(
        [
            {
                "winner": "model_b",
                "conversation_a": [*same, {"role": "assistant", "content": "a"}],
                "conversation_b": [*same, {"role": "assistant", "content": "b"}],
                "model_a": "x",
                "model_b": "y",
                "battle_id": "1",
                "question_id": "q",
                "turn": 1,
                "anony": True,
                "tstamp": 1.0,
            },
            {
                "winner": "model_a",
                "conversation_a": [*same, {"role": "assistant", "content": ""}],
                "conversation_b": [*same, {"role": "assistant", "content": "b"}],
                "model_a": "x",
                "model_b": "y",
                "battle_id": "2",
                "question_id": "q",
                "turn": 1,
                "anony": True,
                "tstamp": 2.0,
            },
        ]
    )
    pairs = preference_pairs(rows)
    assert len(pairs) == 1  # an empty reply is no answer to prefer or reject
    assert pairs["chosen"][0] == [{"role": "assistant", "content": "b"}] and pairs["model_chosen"][0] == "y"


def test_export_round_trips_jsonl(tmp_path: Path, log_dir: Path):
    board = board_from_logs(log_dir, BoardOptions(rounds=0))
    path = write_table(board.battles, tmp_path / "b.jsonl")
    back = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(back) == len(board.battles) and {b["drop_reason"] for b in back} == {None, "identity"}


def test_view_shows_a_new_vote_after_the_background_build(log_dir: Path):
    view = LeaderboardView(log_dir, BoardOptions(rounds=10))
    view.live.sync()
    board, version = view.board()
    assert version == 1 and view.board()[0] is board and not view.changed_since(version)
    rec = JsonlRecorder(log_dir, IdentityPolicy("none"))
    rec.vote_listeners.append(view.live.nudge)
    rec.vote(vote("rightvote", battle("strong", "weak")))
    view.live.sync()
    assert view.changed_since(version)
    summary, compact, *_ = view.outputs()
    assert summary.startswith("Updated 0 s ago.") and "14 battles" in summary
    # the tab's default: a few columns a phone can show, the note among them; the rest on request
    assert list(compact.columns) == ["Rank", "Model", "Rating (95% CI)", "Battles", "Note"]
    assert list(compact["Note"]) == ["preliminary", "preliminary"]
    table = view.outputs(more_columns=True)[1]
    assert list(table.columns) == DISPLAY_COLUMNS
    joined = "\u2060\u2013\u2060"  # the dash held to its numbers: a narrow column wraps after the rating
    assert list(compact["Rating (95% CI)"]) == [
        f"{rating} ({interval.replace(' to ', joined)})"
        for rating, interval in zip(table["Rating"], table["95% CI"], strict=True)
    ]
    assert compact.drop(columns="Rating (95% CI)").equals(table[["Rank", "Model", "Battles", "Note"]])
    shown = table.set_index("Model")  # both preliminary (under 50 battles): no order to be sure of, speeds still
    assert list(shown["P(above next)"]) == ["", ""] and "next comparison" not in summary
    assert (shown.loc["strong", "First token (s)"], shown.loc["strong", "Tokens/s"]) == ("1.56", "13.5")
    assert (shown.loc["weak", "First token (s)"], shown.loc["weak", "Tokens/s"]) == ("0.20", "30.0")
    assert Path(view.export("pairs_jsonl")).read_text().count("\n") == 13
    battles = pd.read_parquet(view.export("battles_parquet"))
    assert len(battles) == 16 and "conversation_a" in battles and "offset" not in battles
    view.close()


def test_view_shows_rank_confidence_and_the_next_comparison(log_dir: Path):
    view = LeaderboardView(log_dir, BoardOptions(rounds=50, min_battles=5))
    view.live.sync()
    summary, table, *_ = view.outputs(more_columns=True)
    board, _ = view.board()
    sure = board.table.set_index("model")
    shown = table.set_index("Model")
    assert shown.loc["strong", "P(above next)"] == f"{sure.loc['strong', 'p_above_next']:.2f}"
    assert shown.loc["strong", "More battles (next)"] == f"{sure.loc['strong', 'more_battles_next']:,.0f}"
    assert (shown.loc["weak", "P(above next)"], shown.loc["weak", "More battles (next)"]) == ("", "")
    assert shown.loc["strong", "P(above next) (style)"] == f"{sure.loc['strong', 'style_p_above_next']:.2f}" != ""
    assert "Most useful next comparison: strong vs weak" in summary
    view.close()


def test_display_table_of_nothing():
    assert display_table(pd.DataFrame()).empty


def test_view_shows_categories_and_my_votes(log_dir: Path):
    from webui.leaderboard.board.display import category_choices

    view = LeaderboardView(log_dir, BoardOptions(rounds=0))
    view.live.sync()
    board, _ = view.board()
    assert [c for _, c in category_choices(board)][:1] == ["all"] and "coding" in [
        c for _, c in category_choices(board)
    ]
    summary, table, *_ = view.outputs("multi-turn")
    assert summary.startswith("Category **multi-turn**: 1 of the 13 battles") and len(table) == 2
    assert "Shrunk toward the overall board" in summary  # a built-in category's board is shrunk, and says so
    assert "Shrunk" not in view.outputs("all")[0]
    note, mine = view.my_votes("h:nobody")
    assert "not voted" in note and mine.empty
    assert "ip_logging is none" in view.my_votes("")[0]
    assert list(display_table(board.table)["Note"]) == ["preliminary", "preliminary"]


def test_parquet_without_pyarrow_says_what_to_install(tmp_path, monkeypatch, capsys) -> None:
    """pyarrow is an extra: without it a Parquet export is refused with the install command, and
    JSON Lines still works."""
    import importlib.util

    import pandas as pd

    from webui.leaderboard.board import export

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "pyarrow" else real(name, *a))
    frame = pd.DataFrame({"a": [1]})
    with pytest.raises(ValueError, match=r"pairwise-arena\[parquet\]"):
        export.write_table(frame, tmp_path / "x.parquet")
    assert export.write_table(frame, tmp_path / "x.jsonl").read_text() == '{"a": 1}\n'
