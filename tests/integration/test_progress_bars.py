"""Long command-line work shows a progress bar on a terminal and nothing of it in a pipe: the
simulator and the leaderboard's first index of a folder, run as a person runs them (a subprocess
whose standard error is a pseudo-terminal, or a pipe)."""

from __future__ import annotations

from pathlib import Path

from tests.terminal import bars, on_pipe, on_terminal

BATTLES = 400


def test_the_simulator_shows_a_bar_on_a_terminal_and_none_in_a_pipe(tmp_path: Path) -> None:
    code, seen = on_terminal(["webui.leaderboard.simulate", str(tmp_path / "tty"), "--battles", str(BATTLES)])
    assert code == 0, seen
    drawn = bars(seen)
    assert drawn and all(bar.startswith("simulating  [") for bar in drawn), seen
    assert f"{BATTLES}/{BATTLES} battles  100%" in drawn[-1] and " left" in drawn[-1]
    code, piped = on_pipe(["webui.leaderboard.simulate", str(tmp_path / "pipe"), "--battles", str(BATTLES)])
    assert code == 0 and "\r" not in piped and "simulating" not in piped, piped


def test_the_first_index_of_a_folder_shows_a_bar_on_a_terminal_and_none_in_a_pipe(tmp_path: Path) -> None:
    folders = [tmp_path / "tty", tmp_path / "pipe"]
    for folder in folders:
        code, _ = on_pipe(["webui.leaderboard.simulate", str(folder), "--battles", str(BATTLES)])
        assert code == 0
    command = ["webui.leaderboard", "--rounds", "0"]
    code, seen = on_terminal([*command, str(folders[0])])
    assert code == 0, seen
    drawn = bars(seen)
    assert drawn and all(bar.startswith("indexing votes  [") for bar in drawn), seen
    assert "100%" in drawn[-1] and "B/s" in drawn[-1], drawn[-1]
    assert "vote index" in seen  # the report after it, on a line of its own
    code, piped = on_pipe([*command, str(folders[1])])
    assert code == 0 and "\r" not in piped and "indexing votes" not in piped, piped
    assert "vote index" in piped  # the report itself is no progress bar: it stays
    code, again = on_terminal([*command, str(folders[0])])
    assert code == 0 and not bars(again), "a catch-up with nothing to read draws no bar"
