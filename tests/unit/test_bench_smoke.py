"""The bench's pure helpers (no model, no server, no timing): percentiles, tables, and reading the
UI's streamed chat updates. The measurements themselves live in bench/ and are never asserted."""

from __future__ import annotations

import json

import pytest

from bench.report import Column, Table, number, seconds, to_markdown
from bench.serving import gradio_path, models
from bench.stats import gaps, median, percentile, rate, ratio


def test_percentiles_interpolate_like_numpy() -> None:
    values = [4.0, 1.0, 3.0, 2.0]
    assert percentile(values, 0) == 1.0
    assert percentile(values, 100) == 4.0
    assert percentile(values, 50) == 2.5
    assert percentile(values, 95) == pytest.approx(3.85)
    assert median([5.0]) == 5.0
    assert percentile([], 50) is None
    with pytest.raises(ValueError, match="q must be in"):
        percentile(values, 101)


def test_rates_ratios_and_gaps_handle_missing_values() -> None:
    assert gaps([0.0, 0.5, 1.5]) == [0.5, 1.0]
    assert gaps([1.0]) == []
    assert rate(10, 2.0) == 5.0
    assert rate(10, 0.0) is None and rate(None, 1.0) is None
    assert ratio(1.9, 2.0) == pytest.approx(0.95)
    assert ratio(1.0, None) is None and ratio(1.0, 0) is None


def test_markdown_table_formats_cells_and_escapes_pipes() -> None:
    table = Table(
        "T",
        [Column("name", "name"), Column("t", "time", seconds), Column("r", "ratio", number(2))],
        [{"name": "a|b", "t": 0.25, "r": 0.951}, {"name": "c", "t": 2.5, "r": None}],
        ["a note"],
    )
    out = to_markdown(table)
    assert "| name | time | ratio |" in out
    assert "| a\\|b | 250 ms | 0.95 |" in out
    assert "| c | 2.50 s | — |" in out
    assert out.rstrip().endswith("- a note")


def test_ui_updates_give_first_text_and_token_count() -> None:
    pane = gradio_path.PaneTiming()
    update = {
        "value": [
            {"role": "user", "content": [{"type": "text", "text": "hi"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "▌"}]},
        ]
    }
    gradio_path._observe(pane, gradio_path._reply(update), 0.1)
    assert pane.ttft_s is None  # only the cursor: nothing shown yet
    gradio_path._observe(pane, "The ▌", 0.4)
    gradio_path._observe(pane, "The end.\n\n<sub>7 tokens · first token 0.30 s · 9.0 tokens/s · finished</sub>", 0.9)
    assert (pane.ttft_s, pane.end_s, pane.tokens, pane.server_ttft_s) == (0.4, 0.9, 7, 0.3)
    assert pane.text == "The end." and pane.chunk_times == [0.4, 0.9]


def test_send_arguments_are_filled_by_label() -> None:
    def component(kind: str, label: str = "", elem_id: str = "") -> dict:
        return {"type": kind, "props": {"label": label, "elem_id": elem_id}}

    event = gradio_path.Event(
        3,
        "/sbs_send",
        [
            component("state"),
            component("textbox", "Message", "sbs-input"),
            component("dropdown", "Model A"),
            component("dropdown", "Model B"),
            component("checkbox", "Use Model A's parameters for every pane"),
            component("slider", "max_new_tokens"),
            component("slider", "temperature (0 = greedy)"),
        ],
        [component("chatbot"), component("markdown"), component("chatbot")],
    )
    assert gradio_path.arguments(event, "hello", ["a", "b"], 32) == [None, "hello", "a", "b", False, 32, 0.0]
    assert event.chat_outputs() == [0, 2]
    with pytest.raises(gradio_path.GradioUnavailable):
        gradio_path.arguments(gradio_path.Event(0, "/x", [component("slider", "new knob")], []), "x", [], 1)


def test_the_app_engines_are_found_among_the_apps_descendants(tmp_path) -> None:
    """bench.serving.attach reads the vLLM servers' command lines under /proc: a grandchild counts, a
    process outside the app's tree does not."""
    from bench.serving.attach import vllm_servers

    def proc(pid: int, parent: int, *argv: str) -> None:
        folder = tmp_path / str(pid)
        folder.mkdir()
        (folder / "stat").write_text(f"{pid} (python3 (x)) S {parent} 1 1 0")
        (folder / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")

    proc(10, 1, "python", "app.py")
    proc(
        11,
        10,
        "python",
        "supervisor.py",
        "--served-model-name",
        "Gemma (base)",
        "--host",
        "127.0.0.1",
        "--port",
        "4100",
    )
    proc(12, 11, "python", "-m", "vllm", "--served-model-name", "Gemma (base)", "--port", "4100")
    proc(13, 10, "python", "supervisor.py", "--served-model-name", "smol", "--port", "4200")
    proc(20, 1, "python", "other.py", "--served-model-name", "stranger", "--port", "4300")
    (tmp_path / "self").mkdir()
    assert vllm_servers(10, tmp_path) == {"Gemma (base)": "http://127.0.0.1:4100", "smol": "http://127.0.0.1:4200"}
    assert vllm_servers(99, tmp_path) == {}


def test_variants_share_one_source() -> None:
    first, second = models.variants({"name": "m", "source": "/w/model.gguf"})
    assert first["source"] == second["source"] and first["name"] != second["name"]


def test_the_cold_start_section_reads_the_registrys_own_log_line(settings, caplog) -> None:
    """bench/serving/coldstart.py parses the server log for "NAME ready on DEVICE in X s": the line the
    registry really writes, under its real logger name (a module move once broke this silently)."""
    import logging

    from bench.serving.coldstart import load_times
    from webui.engine.base import Weights
    from webui.engine.registry import Registry
    from webui.models.specs import parse_specs

    specs = parse_specs({"models": [{"name": "Some Model (v2)", "source": "/m"}]})
    registry = Registry(
        specs, settings, loaders={"auto": lambda spec, _s: Weights(lambda v, s: object(), device="cpu")}
    )
    with caplog.at_level(logging.INFO):
        registry.load("Some Model (v2)")
    log = "\n".join(f"2026-11-23 12:00:00,000 INFO {r.name}: {r.getMessage()}" for r in caplog.records)
    assert set(load_times(log)) == {"Some Model (v2)"}


def test_the_relay_upstream_streams_what_the_client_counts() -> None:
    """bench.tier.relay's fake upstream answers `tokens` content events, then the end, usage and
    [DONE]; the client's count finds exactly `tokens` of them (no server, no timing)."""
    from bench.tier.relay import CONTENT, reply_body

    body = reply_body("m", 5)
    events = [e for e in body.split(b"\n\n") if e]
    assert len(events) == 5 + 3 and events[-1] == b"data: [DONE]"
    assert body.count(CONTENT) == 5
    assert json.loads(events[-2][len(b"data: ") :])["usage"]["completion_tokens"] == 5


def test_every_module_a_bench_runs_with_python_m_can_run() -> None:
    """A bench that starts another (`python -m bench.X`) names a module with a main: a move of
    bench/ into rooms once left one calling `bench.votes`, a package nothing runs."""
    import ast
    import importlib.util
    import itertools
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    named = set()
    for file in (root / "bench").rglob("*.py"):
        for node in ast.walk(ast.parse(file.read_text())):
            if isinstance(node, ast.List) and len(node.elts) >= 2:
                texts = [e.value if isinstance(e, ast.Constant) else None for e in node.elts]
                named |= {t for flag, t in itertools.pairwise(texts) if flag == "-m" and t and t.startswith("bench.")}
    assert named, "no bench starts another (the scan finds nothing)"
    for module in sorted(named):
        spec = importlib.util.find_spec(module)
        assert spec is not None and spec.origin, f"{module} is not a module"
        source = Path(spec.origin).read_text()
        assert spec.origin.endswith("__main__.py") or 'if __name__ == "__main__":' in source, f"{module} has no main"


def test_the_replay_bench_can_give_every_conversation_its_own_short_question(tmp_path) -> None:
    from bench.serving.replay import distinct_short_prompts
    from webui.leaderboard.simulate import simulate
    from webui.leaderboard.votes.rows import vote_features

    simulate(tmp_path, battles=400)
    distinct_short_prompts(tmp_path)
    firsts: dict[str, str] = {}
    featured = 0
    for path in tmp_path.glob("*-conv.json"):
        for line in path.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            if not record.get("states"):
                continue
            questions = {state["messages"][0][1] for state in record["states"]}
            assert len(questions) == 1, "both sides of a battle ask the same question"
            (question,) = questions
            conv = record["states"][0]["conv_id"]
            assert firsts.setdefault(conv, question) == question, "every vote of a conversation agrees"
            if "features" in record:
                featured += 1
                assert record["features"] == vote_features(record), "the features are those of the new question"
    assert len(set(firsts.values())) > 150 and max(len(q) for q in firsts.values()) < 80
    assert featured > 100


def test_batching_parity_says_where_two_replies_part() -> None:
    from bench.serving.batching_parity import shared_prefix

    assert shared_prefix("The sea is wide.", "The sea is wide.") is None
    assert shared_prefix("The sea is wide.", "The sea is deep.") == "The sea is "
    assert shared_prefix("The sea", "The sea is wide.") == "The sea"  # one stopped early
