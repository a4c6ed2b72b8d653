"""Model fingerprints: what was served, from the loaded weights to the board's rows.

The fingerprint changes with the weights, the template, the system prompt, the dtype and the
engine, and not otherwise; a big weight file is not read whole; the real registry and recorder
put it in every chat and vote state; the board rates a name that served two fingerprints as two
rows (named so a person can tell them apart) unless merged, and older votes without one stay one
group; the CLI and the tab say which fingerprint each row is.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

from tests.records import battle, vote
from webui.arena.handlers import Handlers
from webui.arena.rules import Owner, PaneSettings
from webui.engine.registry import build_registry
from webui.leaderboard.__main__ import main
from webui.leaderboard.board.build import BoardOptions, board_from_index, board_from_logs
from webui.leaderboard.board.display import display_table
from webui.leaderboard.simulate import simulate
from webui.leaderboard.stats.fingerprints import SEPARATOR, labelled
from webui.leaderboard.votes.index import VoteIndex
from webui.models import fingerprint as fp
from webui.records.events import ClientInfo, Conversation
from webui.records.privacy import IdentityPolicy
from webui.records.storage import JsonlRecorder, read_logs
from webui.services import Services

MiB = 1 << 20


# ---- the fingerprint of loaded weights ----------------------------------------------------------


def weights_folder(root: Path, first: bytes = b"A", size: int = 3 * MiB) -> Path:
    root.mkdir(parents=True)
    (root / "config.json").write_text("{}")
    with (root / "model.safetensors").open("wb") as handle:
        handle.write(first * MiB)
        handle.truncate(size)
    return root


def of(
    folder: Path,
    *,
    gguf: str | None = None,
    dtype: str = "float32",
    engine: str = "transformers 5.23.0",
    template: str | None = "{{ messages }}",
    system: str | None = None,
) -> fp.Fingerprint:
    return fp.variant_fingerprint(fp.local_components(folder, gguf, dtype, engine), template, system)


def test_identical_weights_and_settings_give_one_fingerprint_wherever_they_lie(tmp_path: Path):
    one = weights_folder(tmp_path / "one")
    two = shutil.copytree(one, tmp_path / "elsewhere" / "two")
    assert of(one) == of(two) and len(of(one).id) == fp.ID_CHARS
    assert set(of(one).components) == {"weights", "dtype", "engine", "template"}  # no system prompt, no revision


@pytest.mark.parametrize("change", ["weights", "size", "tail", "template", "system prompt", "dtype", "engine"])
def test_each_component_changes_the_fingerprint(tmp_path: Path, change: str):
    folder = weights_folder(tmp_path / "w")
    before = of(folder)
    kwargs: dict = {}
    if change == "weights":  # a new download: other bytes at the start
        with (folder / "model.safetensors").open("r+b") as handle:
            handle.write(b"B")
    elif change == "size":
        with (folder / "model.safetensors").open("r+b") as handle:
            handle.truncate(3 * MiB + 1)
    elif change == "tail":
        with (folder / "model.safetensors").open("r+b") as handle:
            handle.seek(3 * MiB - 1)
            handle.write(b"Z")
    else:
        kwargs = {
            "template": {"template": "{{ other }}"},
            "system prompt": {"system": "Be brief."},
            "dtype": {"dtype": "bfloat16"},
            "engine": {"engine": "vllm 0.32.0"},
        }[change]
    after = of(folder, **kwargs)
    assert after.id != before.id
    changed = {
        k
        for k in after.components.keys() | before.components.keys()
        if after.components.get(k) != before.components.get(k)
    }
    named = {"size": "weights", "tail": "weights", "system prompt": "system_prompt"}.get(change, change)
    assert changed == {named}  # the record says which component moved


def test_a_big_gguf_file_is_not_read_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A 4 GiB file (sparse: nothing is written) costs two MiB of reading; a change in its middle
    is not seen, and need not be: another file differs at its ends or in its size."""
    path = tmp_path / "big.gguf"
    with path.open("wb") as handle:
        handle.truncate(4 << 30)
    read: list[int] = []
    real_open = Path.open

    def counting_open(self: Path, *args, **kwargs):
        handle = real_open(self, *args, **kwargs)
        if self == path:
            original = handle.read
            handle.read = lambda n=-1: read.append(len(data := original(n))) or data  # type: ignore[method-assign]
        return handle

    monkeypatch.setattr(Path, "open", counting_open)
    first = fp.weights_identity(tmp_path, "big.gguf")
    assert sum(read) == 2 * fp.EDGE_BYTES
    with real_open(path, "r+b") as handle:
        handle.seek(2 << 30)
        handle.write(b"middle")
    assert fp.weights_identity(tmp_path, "big.gguf") == first


def test_hub_snapshots_carry_their_revision_and_remote_models_their_host(tmp_path: Path):
    snapshot = weights_folder(tmp_path / "models--org--m" / "snapshots" / "0123abcd")
    assert fp.local_components(snapshot, None, "float32", "e")["revision"] == "0123abcd"
    remote = fp.remote_components("https://api.example.com/v1", "gpt-x-2026-01")
    assert remote == {"upstream": "api.example.com", "model": "gpt-x-2026-01", "engine": "openai-remote"}
    assert fp.variant_fingerprint(remote, None, None) != fp.variant_fingerprint(
        fp.remote_components("https://other.example.com/v1", "gpt-x-2026-01"), None, None
    )


# ---- through the real registry and recorder -----------------------------------------------------


def test_every_reply_and_vote_record_carries_the_fingerprint_of_what_served_it(settings, tmp_path: Path):
    """tiny-a, tiny-b (another system prompt) and tiny-fschat (another template) share one folder
    of weights: three fingerprints; loading the weights again gives the same three."""
    registry = build_registry(settings)
    registry.start()
    assert registry.wait_idle(60)
    try:
        prints = {name: registry.fingerprint(name) for name in registry.names()}
        assert all(p is not None for p in prints.values()) and len({p.id for p in prints.values()}) == 3
        assert {registry.status(n).fingerprint for n in prints} == {p.id for p in prints.values()}
        assert prints["tiny-a"].components["weights"] == prints["tiny-fschat"].components["weights"]
        assert prints["tiny-a"].components["engine"].startswith("transformers ")
        recorder = JsonlRecorder(tmp_path / "logs", IdentityPolicy("none"))
        handlers = Handlers(Services(settings, registry, recorder))
        me, client = Owner("s1"), ClientInfo("127.0.0.1")
        session = list(handlers.send(None, "battle", "hello", [PaneSettings(own_defaults=True)] * 2, me, client))[-1]
        handlers.vote(session, "leftvote", me, client)
        registry.unload("tiny-a")
        registry.load("tiny-a")
        assert registry.fingerprint("tiny-a") == prints["tiny-a"]
    finally:
        registry.close()
    records = read_logs(tmp_path / "logs").records
    chats = [r for r in records if r["type"] == "chat"]
    (voted,) = [r for r in records if r["type"] == "leftvote"]
    assert len(chats) == 2
    for state in [c["state"] for c in chats] + voted["states"]:
        served = prints[state["model_name"]]
        assert state["fingerprint"] == served.id and state["fingerprint_components"] == dict(served.components)


def test_a_conversation_without_a_fingerprint_keeps_the_old_state_shape():
    from webui.records.storage import state_dict
    from webui.types import SamplingParams

    conv = Conversation("c1", "m", "tokenizer", "", [("user", "hi")], SamplingParams(), "battle")
    assert "fingerprint" not in state_dict(conv)


# ---- the board ----------------------------------------------------------------------------------


def served(conv: Conversation, print_id: str) -> Conversation:
    import dataclasses

    return dataclasses.replace(conv, fingerprint=print_id, fingerprint_components={"weights": print_id})


def record_battles(log_dir: Path, prints: dict[str, list[str | None]], n: int = 12) -> None:
    """`n` battles of "alpha" against "beta" per fingerprint of alpha in `prints["alpha"]` (None:
    an older record without one); alpha wins two in three."""
    recorder = JsonlRecorder(log_dir, IdentityPolicy("none"))
    for print_id in prints["alpha"]:
        for i in range(n):
            a, b = battle("alpha", "beta", (f"left answer {i}", f"right answer {i}"))
            if print_id is not None:
                a, b = served(a, print_id), served(b, "fedcba987654")
            recorder.vote(vote("leftvote" if i % 3 else "rightvote", [a, b]))


def rows_of(log_dir: Path, **options) -> pd.DataFrame:
    return board_from_logs(log_dir, BoardOptions(rounds=0, min_battles=1, **options)).table.set_index("model")


def test_a_change_of_fingerprint_splits_the_rows_and_identical_ones_do_not(tmp_path: Path):
    record_battles(tmp_path / "same", {"alpha": ["1a2b3c4d5e6f", "1a2b3c4d5e6f"]})
    same = rows_of(tmp_path / "same")
    assert sorted(same.index) == ["alpha", "beta"] and same.loc["alpha", "battles"] == 24
    assert same.loc["alpha", "fingerprint"] == "1a2b3c4d5e6f"
    record_battles(tmp_path / "changed", {"alpha": ["1a2b3c4d5e6f", "99aa00bb11cc"]})
    split = rows_of(tmp_path / "changed")
    assert sorted(split.index) == ["alpha @ 1a2b3c", "alpha @ 99aa00", "beta"]
    assert list(split.loc[["alpha @ 1a2b3c", "alpha @ 99aa00"], "fingerprint"]) == ["1a2b3c4d5e6f", "99aa00bb11cc"]
    assert list(split.loc[["alpha @ 1a2b3c", "alpha @ 99aa00"], "battles"]) == [12, 12]


def test_older_votes_without_a_fingerprint_stay_one_group(tmp_path: Path):
    record_battles(tmp_path / "logs", {"alpha": [None, None]})
    assert rows_of(tmp_path / "logs").loc["alpha", "battles"] == 24
    record_battles(tmp_path / "mixed", {"alpha": [None, "1a2b3c4d5e6f", "99aa00bb11cc"]})
    table = rows_of(tmp_path / "mixed")
    assert sorted(table.index) == ["alpha", "alpha @ 1a2b3c", "alpha @ 99aa00", "beta"]
    assert table.loc["alpha", "battles"] == 12
    assert table.loc["alpha", "fingerprint"] == ""  # the older group says it has none


def test_the_operator_merges_a_names_fingerprints(tmp_path: Path):
    record_battles(tmp_path / "logs", {"alpha": ["1a2b3c4d5e6f", "99aa00bb11cc"]})
    for merge in (("alpha",), ("*",)):
        table = rows_of(tmp_path / "logs", merge_fingerprints=merge)
        assert sorted(table.index) == ["alpha", "beta"] and table.loc["alpha", "battles"] == 24
        assert table.loc["alpha", "fingerprint"] == "1a2b3c4d5e6f, 99aa00bb11cc"
    assert len(rows_of(tmp_path / "logs", merge_fingerprints=("other",))) == 3


def test_labels_grow_until_they_tell_fingerprints_apart():
    siblings = ["1a2b3c4d5e6f", "1a2b3c9d9e9f"]
    assert labelled("m", siblings[0], siblings) == f"m{SEPARATOR}1a2b3c4"
    assert labelled("m", "abcdef012345", ["abcdef012345", "0"]) == "m @ abcdef"


def test_the_simulated_late_model_shows_its_fingerprints_in_the_cli_and_the_tab(
    tmp_path: Path, capsys: pytest.CaptureFixture
):
    """A model added late and requantised partway: the board (from the vote index, as the tab
    builds it) rates its two fingerprints apart, and its votes logged in FastChat's older form
    (no fingerprint) as a third row under the plain name; every row says which fingerprint it is."""
    logs = tmp_path / "logs"
    truth = simulate(logs, 600, seed=1, days=2, requantise_late=True)
    late, first, second = truth["late"], truth["fingerprints"][truth["late"]], truth["requantised"][truth["late"]]
    index = VoteIndex(logs)
    try:
        board = board_from_index(index, BoardOptions(rounds=0))
    finally:
        index.close()
    table = board.table.set_index("model")
    rows = {f"{late} @ {first[:6]}": first, f"{late} @ {second[:6]}": second}
    assert set(rows) <= set(table.index)
    assert table.loc[late, "fingerprint"] == ""  # its votes in FastChat's older form: none, one group
    assert {name: table.loc[name, "fingerprint"] for name in rows} == rows
    assert table.loc["ember-7b", "fingerprint"] == truth["fingerprints"]["ember-7b"]
    shown = display_table(board.table).set_index("Model")
    assert {name: shown.loc[name, "Fingerprint"] for name in rows} == rows
    assert main([str(logs), "--rounds", "0", "--no-style"]) == 0
    printed = capsys.readouterr().out
    assert all(f"{name}" in printed and print_id in printed for name, print_id in rows.items())
    assert main([str(logs), "--rounds", "0", "--no-style", "--merge-fingerprints", late]) == 0
    merged = capsys.readouterr().out
    assert f"{late} @" not in merged and ", ".join(sorted([first, second])) in merged


def test_an_index_made_before_fingerprints_gains_their_columns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Migration 1 still makes the tables as they shipped; migration 2 adds the fingerprints."""
    import contextlib
    import sqlite3

    from webui.db import schema

    with monkeypatch.context() as patched:
        patched.setattr(schema, "MIGRATIONS", schema.MIGRATIONS[:1])
        patched.setattr(schema, "LATEST", 1)
        VoteIndex(tmp_path / "logs", tmp_path / "index.sqlite3").close()

    def columns() -> list[str]:
        with contextlib.closing(sqlite3.connect(tmp_path / "index.sqlite3")) as db:
            return [row[1] for row in db.execute("PRAGMA table_info(votes)")]

    assert "fingerprint_a" not in columns() and "ttft_s_b" in columns()
    record_battles(tmp_path / "logs", {"alpha": ["1a2b3c4d5e6f", "99aa00bb11cc"]}, n=3)
    index = VoteIndex(tmp_path / "logs", tmp_path / "index.sqlite3")
    try:
        board = board_from_index(index, BoardOptions(rounds=0, min_battles=1))
    finally:
        index.close()
    assert columns()[-2:] == ["fingerprint_a", "fingerprint_b"]
    assert sorted(board.table["model"]) == ["alpha @ 1a2b3c", "alpha @ 99aa00", "beta"]


def test_smart_pairing_reads_the_row_of_what_a_name_serves_now(tmp_path: Path):
    from webui.leaderboard.board.view import LeaderboardView
    from webui.ui.leaderboard_tab import pairing_evidence

    for n, print_id in ((3, None), (6, "1a2b3c4d5e6f"), (9, "99aa00bb11cc")):  # each row its own count
        record_battles(tmp_path, {"alpha": [print_id]}, n=n)
    view = LeaderboardView(tmp_path, BoardOptions(rounds=0, min_battles=1))
    view.serving = lambda: {"alpha": "99aa00bb11cc"}
    try:
        view.live.sync()
        table = view.board()[0].table.set_index("model")
        evidence = pairing_evidence(view)()
    finally:
        view.close()
    assert evidence is not None and set(evidence.ratings) == {"alpha", "alpha @ 1a2b3c", "beta"}  # the old weights' row
    assert evidence.ratings["alpha"] == table.loc["alpha @ 99aa00", "rating"]
    assert evidence.battles[frozenset(("alpha", "beta"))] == 9.0
