"""`Generations`, what a server stop uses to end every running generation at once, and a closed tab
the runs of its own session."""

from __future__ import annotations

import gc
import threading

from webui.services import Generations


def test_stop_all_sets_the_running_ones_and_every_later_one() -> None:
    generations = Generations()
    running, finished = threading.Event(), threading.Event()
    assert generations.track(running) is running and generations.track(finished) is finished
    finished.set()  # a run that ended by itself is not counted
    assert generations.stop_all() == 1
    assert running.is_set()
    late = generations.track(threading.Event())
    assert late.is_set(), "a generation that starts during the stop must end at once"
    assert generations.stop_all() == 0


def test_an_ended_run_is_not_kept() -> None:
    generations = Generations()
    generations.track(threading.Event())  # nobody holds it any more: gone with its run
    gc.collect()
    assert generations.stop_all() == 0


def test_stop_session_sets_only_that_sessions_running_runs() -> None:
    generations = Generations()
    mine, theirs, api, done = (threading.Event() for _ in range(4))
    generations.track(mine, session_hash="tab-1")
    generations.track(theirs, session_hash="tab-2")
    generations.track(api)  # an API request belongs to no tab
    generations.track(done, session_hash="tab-1")
    done.set()  # a run that ended by itself is not counted
    assert generations.stop_session("tab-1") == 1
    assert mine.is_set()
    assert not theirs.is_set() and not api.is_set()
    assert generations.stop_session("tab-1") == 0
    assert generations.stop_all() == 2, "the other tab's run and the API request still run"
