"""Stop strings over a stream of text chunks.

A stop string can arrive split across chunks ("###" as "#" then "##"), so the filter holds back
any tail of the text that could still become a stop string, and releases it once it cannot.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable

from webui.types import TextDelta


class StopFilter:
    def __init__(self, stops: Iterable[str]) -> None:
        self.stops = tuple(dict.fromkeys(s for s in stops if s))
        self._pending = ""

    def feed(self, text: str) -> tuple[str, bool]:
        """Returns (text safe to show, whether a stop string was found). After a hit the text
        from the stop string on is discarded."""
        buffer = self._pending + text
        hits = [i for i in (buffer.find(s) for s in self.stops) if i >= 0]
        if hits:
            self._pending = ""
            return buffer[: min(hits)], True
        keep = self._partial_tail(buffer)
        self._pending = buffer[len(buffer) - keep :] if keep else ""
        return buffer[: len(buffer) - keep], False

    def flush(self) -> str:
        """The held-back tail, at the end of the stream (it never became a stop string)."""
        rest, self._pending = self._pending, ""
        return rest

    def _partial_tail(self, buffer: str) -> int:
        longest = 0
        for stop in self.stops:
            for size in range(min(len(stop) - 1, len(buffer)), longest, -1):
                if buffer.endswith(stop[:size]):
                    longest = size
                    break
        return longest


def shown_until_stop(
    texts: Iterable[str], stops: StopFilter, *, complete: Callable[[], bool] = lambda: True
) -> Generator[TextDelta, None, bool]:
    """A backend's text chunks as the TextDeltas a caller may see, up to the first stop string;
    returns True when a stop string ended them. When `texts` runs out, the held-back tail is shown
    only if `complete()`: a stream cut short (Stop) may have held back half a stop string."""
    for text in texts:
        if not text:
            continue
        shown, hit = stops.feed(text)
        if shown:
            yield TextDelta(shown)
        if hit:
            return True
    tail = stops.flush() if complete() else ""
    if tail:
        yield TextDelta(tail)
    return False
