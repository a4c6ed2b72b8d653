"""The progress bar (webui/progress.py) on a stand-in terminal with a stand-in clock: redrawn at
most a few times a second however often work is counted, quiet on anything that is not a
terminal, and ended on a line of its own."""

from __future__ import annotations

import io
import threading

from webui.progress import Progress, duration, size


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_hot_loop_redraws_only_a_few_times_a_second() -> None:
    screen, clock = Terminal(), Clock()
    bar = Progress("indexing votes", 10_000, unit="rows", stream=screen, clock=clock)
    for _ in range(10_000):  # 10,000 rows counted in 2 s: 0.2 ms apart
        clock.now += 0.0002
        bar.add()
    bar.close()
    drawn = screen.getvalue().split("\r")[1:]
    assert 8 <= len(drawn) <= 10, f"{len(drawn)} redraws for 2 s of work"  # one per 0.25 s, and the end
    assert drawn[-1].startswith("indexing votes  [########################]  10,000/10,000 rows  100%")
    assert "5,000/s" in drawn[-1] and "0 s left" in drawn[-1] and drawn[-1].endswith("\n")


def test_nothing_is_written_where_the_stream_is_no_terminal() -> None:
    piped = io.StringIO()
    with Progress("simulating", 10, stream=piped) as bar:
        for _ in range(10):
            bar.add()
    assert piped.getvalue() == ""


def test_the_rate_and_time_left_follow_the_count() -> None:
    screen, clock = Terminal(), Clock()
    bar = Progress("judging", 40, unit="battles", stream=screen, clock=clock)
    clock.now += 30
    bar.note("1 failed")
    bar.add(10)  # 10 in 30 s: 20 a minute, 30 left take 90 s
    assert bar.line(clock.now) == (
        "judging  [######------------------]  10/40 battles  25%  20/min  2 min left  (1 failed)"
    )
    unknown = Progress("indexing votes", fmt=size, stream=screen, clock=clock)
    clock.now += 2
    unknown.add(3_000_000)
    assert unknown.line(clock.now) == "indexing votes  3.0 MB  1.5 MB/s"
    assert (duration(float("inf")), duration(45), duration(600), duration(9000)) == ("?", "45 s", "10 min", "2.5 h")


def test_threads_count_together() -> None:
    bar = Progress("replaying", 4000, stream=Terminal())
    workers = [threading.Thread(target=lambda: [bar.add() for _ in range(1000)]) for _ in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert bar.done == 4000
