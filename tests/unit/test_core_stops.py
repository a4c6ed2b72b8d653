"""Stop strings end the text and never show, even split across chunks."""

from __future__ import annotations

import pytest

from webui.engine.stops import StopFilter


def _run(stops: list[str], chunks: list[str]) -> tuple[str, bool]:
    f = StopFilter(stops)
    shown = []
    for chunk in chunks:
        text, hit = f.feed(chunk)
        shown.append(text)
        if hit:
            return "".join(shown), True
    return "".join(shown) + f.flush(), False


@pytest.mark.parametrize("chunks", [
    ["Paris.###Human"], ["Paris.#", "##Human"], ["Paris.", "#", "#", "#"], ["Par", "is.##", "#"],
])
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
