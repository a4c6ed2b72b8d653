"""A soak: the real server (`python app.py` in a subprocess on loopback) visited at a bounded pace
for a while, then left idle, with its RSS, threads and open descriptors sampled every few seconds.

    python -m bench.serving.soak                          # 30 min: 22 of visits, 8 idle; tiny model
    python -m bench.serving.soak --minutes 2 --idle-minutes 1 --session-idle-min 0.5
    python -m bench.serving.soak --models assets/models.yaml   # the demo models (slower visits)

A visit is what a person does once: open the app (gradio_client fetches the page config, and gets
the session cookie), send a battle message, vote, leave. Each visit is a new Gradio session, so
the server's per-session memory shows; with `--session-idle-min` shorter than the run, sessions
expire during it and RSS should level off, then stay level (or fall) while idle. Bounded: at most
`--visitors` visits at a time and `--visits-per-min` a minute; loopback only.

Writes bench/results/soak-<UTC time>.json (every sample) and .md (the summary), with the load
average: the machine may be shared, which slows visits but not what is measured (growth).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

from bench.report import ROOT, load_average
from bench.serving.server import ArenaProcess

RESULTS = ROOT / "bench" / "results"


@dataclass
class Sample:
    t_s: float
    phase: str  # visits | idle
    rss_mb: float
    threads: int
    fds: int
    visits: int
    errors: int
    load1: float


@dataclass
class Soak:
    settings: dict[str, Any]
    samples: list[Sample] = field(default_factory=list)
    visits: int = 0
    errors: list[str] = field(default_factory=list)


def process_figures(pid: int) -> tuple[float, int, int]:
    """(RSS in MB, threads, open descriptors) of a process, from /proc."""
    rss_kb, threads = 0, 0
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                rss_kb = int(line.split()[1])
            elif line.startswith("Threads:"):
                threads = int(line.split()[1])
    return rss_kb / 1024, threads, len(os.listdir(f"/proc/{pid}/fd"))


def visit(url: str) -> None:
    """One person: open the app, send a battle message, vote, leave."""
    from gradio_client import Client

    client = Client(url, verbose=False, download_files=False)
    try:
        client.predict("Name three colours.", api_name="/battle_send")
        client.predict(api_name="/battle_vote_tie")
    finally:
        client.close()


class Visitors:
    """`count` threads visiting until `stop`, together at most `per_min` visits a minute."""

    def __init__(self, url: str, soak: Soak, count: int, per_min: float) -> None:
        self.url, self.soak, self.count = url, soak, count
        self.gap_s = 60.0 / per_min
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.next_at = time.monotonic()

    def _turn(self) -> bool:
        with self.lock:
            wait = self.next_at - time.monotonic()
            self.next_at = max(self.next_at, time.monotonic()) + self.gap_s
        return not self.stop.wait(max(0.0, wait))

    def _run(self) -> None:
        while self._turn():
            try:
                visit(self.url)
                with self.lock:
                    self.soak.visits += 1
            except Exception as exc:  # counted and reported, the soak goes on
                with self.lock:
                    self.soak.errors.append(f"{type(exc).__name__}: {exc}"[:300])

    def start(self) -> list[threading.Thread]:
        threads = [threading.Thread(target=self._run, name=f"visitor-{i}", daemon=True) for i in range(self.count)]
        for thread in threads:
            thread.start()
        return threads


def run(args: argparse.Namespace) -> Soak:
    work = Path(tempfile.mkdtemp(prefix="arena-soak-"))
    models = args.models or _tiny_models(work)
    extra = ["--rate-votes", "0", "--rate-votes-day", "0", "--session-idle-min", str(args.session_idle_min)]
    soak = Soak(settings={k: str(v) for k, v in vars(args).items()})
    with ArenaProcess(models, work, extra_args=extra) as server:
        server.wait(600)
        assert server.proc is not None
        visitors = Visitors(server.url, soak, args.visitors, args.visits_per_min)
        started = time.monotonic()
        threads = visitors.start()
        phase, end_visits = "visits", started + args.minutes * 60 - args.idle_minutes * 60
        while time.monotonic() < started + args.minutes * 60:
            if phase == "visits" and time.monotonic() >= end_visits:
                visitors.stop.set()
                for thread in threads:
                    thread.join(120)
                phase = "idle"
            _sample(soak, server.proc.pid, started, phase)
            time.sleep(args.every_s)
        visitors.stop.set()
        _sample(soak, server.proc.pid, started, phase)
    return soak


def _sample(soak: Soak, pid: int, started: float, phase: str) -> None:
    rss, threads, fds = process_figures(pid)
    soak.samples.append(
        Sample(
            round(time.monotonic() - started, 1),
            phase,
            round(rss, 1),
            threads,
            fds,
            soak.visits,
            len(soak.errors),
            round(load_average()[0], 2),
        )
    )


def _tiny_models(work: Path) -> Path:
    from tests.tiny import THREE, build_tiny_model, tiny_models

    return tiny_models(work, build_tiny_model(work / "tiny"), THREE)


def summary(soak: Soak) -> dict[str, Any]:
    s = soak.samples
    visits = [x for x in s if x.phase == "visits"]
    idle = [x for x in s if x.phase == "idle"]

    def figures(name: str) -> dict[str, float]:
        values = [getattr(x, name) for x in s]
        out = {"start": values[0], "end": values[-1], "peak": max(values), "min": min(values)}
        if visits:
            out["end_of_visits"] = getattr(visits[-1], name)
        return out

    second_half = visits[len(visits) // 2 :]
    slope = (
        (second_half[-1].rss_mb - second_half[0].rss_mb) / max(1e-9, (second_half[-1].t_s - second_half[0].t_s) / 3600)
        if len(second_half) > 1
        else 0.0
    )
    loads = [x.load1 for x in s]
    return {
        "visits": soak.visits,
        "errors": len(soak.errors),
        "samples": len(s),
        "rss_mb": figures("rss_mb"),
        "threads": figures("threads"),
        "fds": figures("fds"),
        "rss_mb_per_hour_second_half_of_visits": round(slope, 1),
        "idle_s": round(idle[-1].t_s - idle[0].t_s, 1) if len(idle) > 1 else 0.0,
        "load1": {"min": min(loads), "max": max(loads), "mean": round(sum(loads) / len(loads), 2)},
    }


def to_markdown(soak: Soak, result: dict[str, Any]) -> str:
    lines = [
        f"# Soak, {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC",
        "",
        "Settings: " + ", ".join(f"{k}={v}" for k, v in soak.settings.items()),
        "",
        f"{result['visits']} visits (each a new session: page config, battle message, vote), "
        f"{result['errors']} errors, {result['samples']} samples; load average (1 min) "
        f"{result['load1']['min']}–{result['load1']['max']}, mean {result['load1']['mean']} "
        f"on {os.cpu_count()} cores.",
        "",
        "| | start | end of visits | end (after idle) | peak | min |",
        "|---|---|---|---|---|---|",
    ]
    for name in ("rss_mb", "threads", "fds"):
        f = result[name]
        lines.append(
            f"| {name} | {f['start']} | {f.get('end_of_visits', '')} | {f['end']} | {f['peak']} | {f['min']} |"
        )
    lines += [
        "",
        f"RSS slope over the second half of the visits: {result['rss_mb_per_hour_second_half_of_visits']} MB/h.",
        "",
        "| t (s) | phase | RSS MB | threads | fds | visits | load1 |",
        "|---|---|---|---|---|---|---|",
    ]
    step = max(1, len(soak.samples) // 40)
    lines += [
        f"| {x.t_s} | {x.phase} | {x.rss_mb} | {x.threads} | {x.fds} | {x.visits} | {x.load1} |"
        for x in soak.samples[::step]
    ]
    if soak.errors:
        lines += ["", "First errors:", *(f"- {e}" for e in soak.errors[:5])]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.serving.soak", description=__doc__.splitlines()[0])
    add = parser.add_argument
    add("--minutes", type=float, default=30.0, help="whole run, idle part included")
    add("--idle-minutes", type=float, default=8.0, help="the last part, without visits")
    add("--every-s", type=float, default=10.0, help="seconds between samples")
    add("--visitors", type=int, default=2, help="visits at a time")
    add("--visits-per-min", type=float, default=20.0, help="at most this many visits a minute")
    add("--session-idle-min", type=float, default=5.0, help="the server's --session-idle-min")
    add("--models", type=Path, help="models file (default: a tiny random Llama built now)")
    add("--out", type=Path, help="JSON path (default bench/results/soak-<time>.json; .md beside it)")
    args = parser.parse_args(argv)
    soak = run(args)
    result = summary(soak)
    out = args.out or RESULTS / f"soak-{dt.datetime.now(dt.timezone.utc):%Y%m%d-%H%M}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "summary": result,
                "settings": soak.settings,
                "errors": soak.errors[:50],
                "samples": [asdict(x) for x in soak.samples],
            },
            indent=1,
        )
    )
    out.with_suffix(".md").write_text(to_markdown(soak, result))
    print(to_markdown(soak, result))


if __name__ == "__main__":
    main()
