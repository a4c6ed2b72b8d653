"""Stop strings end the text and never show, even split across chunks."""

from __future__ import annotations

import pytest

from webui.engine.base import decode_rate
from webui.engine.stops import StopFilter, shown_until_stop


def _run(stops: list[str], chunks: list[str]) -> tuple[str, bool]:
    f = StopFilter(stops)
    shown = []
    for chunk in chunks:
        text, hit = f.feed(chunk)
        shown.append(text)
        if hit:
            return "".join(shown), True
    return "".join(shown) + f.flush(), False


@pytest.mark.parametrize(
    "chunks",
    [
        ["Paris.###Human"],
        ["Paris.#", "##Human"],
        ["Paris.", "#", "#", "#"],
        ["Par", "is.##", "#"],
    ],
)
def test_split_stop_string_is_trimmed(chunks: list[str]) -> None:
    assert _run(["###"], chunks) == ("Paris.", True)


def test_earliest_of_several_stops_wins() -> None:
    assert _run(["User:", "\n\n"], ["a\n", "\nb User:"]) == ("a", True)


def test_partial_match_that_never_completes_is_released() -> None:
    f = StopFilter(["###"])
    assert f.feed("a ##") == ("a ", False)  # held back: may become ###
    assert f.feed(" b") == ("## b", False)
    assert f.feed("#") == ("", False)
    assert f.flush() == "#"


def test_no_stops_passes_everything() -> None:
    assert _run([], ["a", "b"]) == ("ab", False)


def _shown(chunks: list[str], *, complete: bool) -> tuple[list[str], bool]:
    stream = shown_until_stop(iter(chunks), StopFilter(["###"]), complete=lambda: complete)
    shown: list[str] = []
    while True:
        try:
            shown.append(next(stream).text)
        except StopIteration as end:
            return shown, end.value


def test_backends_show_chunks_until_a_stop_and_keep_a_cut_off_tail_back() -> None:
    assert _shown(["Hello", "", " wor", "ld ##", "# hidden"], complete=True) == (["Hello", " wor", "ld "], True)
    assert _shown(["Hello #", "#"], complete=True) == (["Hello ", "##"], False)
    # Stopped by the caller: "##" may be the start of a stop string the model never finished.
    assert _shown(["Hello #", "#"], complete=False) == (["Hello "], False)


def test_decode_rate_counts_the_tokens_after_the_first() -> None:
    assert decode_rate(11, first_at=2.0, now=4.0) == 5.0
    assert decode_rate(1, first_at=2.0, now=4.0) is None
    assert decode_rate(11, first_at=None, now=4.0) is None
