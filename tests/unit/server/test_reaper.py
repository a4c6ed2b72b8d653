"""The session reaper edits Gradio's private per-session state: it must refuse to start, naming what
moved, when an installed Gradio keeps that state elsewhere (rather than leak sessions quietly)."""

from types import SimpleNamespace

import gradio as gr
import pytest
from gradio.state_holder import SessionState

from webui.server.reaper import GRADIO_INTERNALS, GradioInternalsMoved, SessionReaper, check_gradio_internals
from webui.server.sessions import SessionBook


def _blocks() -> gr.Blocks:
    with gr.Blocks() as blocks:
        gr.Textbox()
    return blocks


def test_the_installed_gradio_keeps_session_state_where_the_reaper_edits_it() -> None:
    blocks = _blocks()
    check_gradio_internals(blocks)  # raises, naming each moved attribute, after a Gradio upgrade
    holder = blocks.state_holder
    assert isinstance(holder.session_data, dict) and isinstance(holder.time_last_used, dict)
    assert isinstance(blocks._queue.pending_event_ids_session, dict)


@pytest.mark.parametrize("path", GRADIO_INTERNALS)
def test_a_moved_internal_is_named_and_the_reaper_refuses_to_start(path: str) -> None:
    owner, attribute = path.split(".")
    blocks = _blocks()
    moved = SimpleNamespace(**{k: v for k, v in vars(getattr(blocks, owner)).items() if k != attribute})
    fake = SimpleNamespace(_queue=blocks._queue, state_holder=blocks.state_holder)
    setattr(fake, owner, moved)
    with pytest.raises(GradioInternalsMoved, match=rf"Blocks\.{owner}\.{attribute}"):
        SessionReaper(fake, SessionBook(), idle_s=60)


def test_an_idle_session_goes_from_gradio_and_from_the_book() -> None:
    blocks = _blocks()
    now = [1000.0]
    book = SessionBook(clock=lambda: now[0])
    reaper = SessionReaper(blocks, book, idle_s=60)
    for session_hash in ("idle", "fresh"):
        book.claim(session_hash, "secret")
        blocks.state_holder.session_data[session_hash] = SessionState(blocks)
    now[0] += 30
    book.touch("fresh")
    now[0] += 45  # "idle" unused for 75 s, "fresh" for 45 s
    assert reaper.sweep() == 1
    assert "idle" not in book and "idle" not in blocks.state_holder.session_data
    assert "fresh" in book and "fresh" in blocks.state_holder.session_data
