"""The UI path: the app's own chat events over HTTP, read as the page in a browser reads them.

The events are found by name in the page's config (`/direct_send` for one pane, `/sbs_send` for two
named panes) and their inputs are filled in by label, so that a reordered control does not silently
send the wrong value. Each turn runs in a fresh session that the server already holds (as a page's
does after its load event), through `bench.serving.ui_client`, which reads every update as it arrives
(gradio_client waited up to 50 ms for each). Time to first token here is the first update in which
the pane shows text; tokens come from the statistics line the UI writes under a finished reply. A
pane arrives as an update dict (the first and last update of a run) or as its bare messages (while
it streams, webui.ui.common.Delta); `_reply` reads both.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any

from bench.serving.paths import CURSOR, Request, Sample
from bench.serving.ui_client import Event, UIClient

DIRECT = "/direct_send"
SIDE_BY_SIDE = "/sbs_send"
CLEAR = {DIRECT: "/direct_clear", SIDE_BY_SIDE: "/sbs_clear"}  # creates the session before the timed turn
# webui.ui.views.stats_line: "N tokens · first token X s · R tokens/s · reason", under a finished reply
_STATS = re.compile(r"\n\n<sub>(\d+) tokens(?: · first token ([\d.]+) s)?[^<]*</sub>\s*$")
_ERROR = "⚠️"


class GradioUnavailable(RuntimeError):
    """The server has no UI event of that name (the UI has not landed, or was renamed)."""


@dataclass
class PaneTiming:
    ttft_s: float | None = None
    end_s: float | None = None  # the update that first showed the finished reply
    text: str = ""
    tokens: int | None = None
    server_ttft_s: float | None = None  # the engine's first-token time, from the statistics line
    chunk_times: list[float] = field(default_factory=list)
    error: str | None = None


class GradioDriver:
    """The app's page, driven over its queue protocol; each turn runs in a fresh session."""

    def __init__(self, url: str) -> None:
        self.client = UIClient(url)

    def endpoint(self, api_name: str) -> Event:
        found = self.client.event(api_name)
        if found is None:
            known = ", ".join(sorted(self.client.events))
            raise GradioUnavailable(f"the UI offers no {api_name} event (found: {known})")
        return found

    def turn(self, api_name: str, models: list[str], request: Request) -> tuple[float, list[PaneTiming]]:
        """One send in a fresh session: (wall time, per-pane timings)."""
        event = self.endpoint(api_name)
        data = arguments(event, request.prompt, models, request.max_tokens)
        panes = [PaneTiming() for _ in models]
        where = event.chat_outputs()[: len(models)]  # side by side has up to four; the first ones are used
        session = self.client.new_session(prepare=CLEAR.get(api_name))  # a new conversation, not timed
        start = time.perf_counter()
        try:
            for outputs in self.client.stream(event, data, session):
                now = time.perf_counter() - start
                for pane, index in zip(panes, where, strict=True):
                    _observe(pane, _reply(outputs[index]), now)
        except Exception as exc:  # a refusal (gr.Error) ends the call without a reply
            raise RuntimeError(f"the UI refused: {exc}") from None
        return time.perf_counter() - start, panes

    def sample(self, request: Request) -> Sample:
        """The Direct chat path as a `Sample`, comparable with the other paths."""
        try:
            total, (pane,) = self.turn(DIRECT, [request.model], request)
        except GradioUnavailable:
            raise
        except Exception as exc:  # a failed request is a figure (errors), not a crash
            return Sample("gradio", request.model, 0.0, error=f"{type(exc).__name__}: {exc}")
        return Sample(
            "gradio",
            request.model,
            total,
            pane.ttft_s,
            pane.tokens,
            "ui-stats",
            pane.chunk_times,
            pane.text,
            error=pane.error,
            server_ttft_s=pane.server_ttft_s,
        )


def arguments(event: Event, message: str, models: list[str], max_tokens: int) -> list[Any]:
    """Values for a send event's inputs, in order: null for the session (the server holds it), the
    message, as many panes as models, the models in order (none for the panes beyond), 'same
    parameters' off, and for every pane greedy decoding with a fixed length."""
    values = {
        "temperature (0 = greedy)": 0.0,
        "top_p": 1.0,
        "top_k (0 = off)": 0,
        "max_new_tokens": max_tokens,
        "repetition_penalty": 1.0,
        "seed (-1 = random)": -1,
        "system prompt": "",
    }
    queue = list(models)
    args: list[Any] = []
    for component in event.inputs:
        kind, props = component.get("type"), component.get("props", {})
        label = props.get("label") or ""
        if kind == "state":
            args.append(None)
        elif kind == "textbox" and str(props.get("elem_id", "")).endswith("-input"):
            args.append(message)
        elif kind == "radio" and label == "Panes":
            args.append(len(models))
        elif kind == "dropdown" and label.startswith("Model"):
            args.append(queue.pop(0) if queue else None)
        elif label in values:
            args.append(values[label])
        elif kind == "checkbox":
            args.append(False)  # "use A's parameters for both" / "use the model's own settings": off
        else:
            raise GradioUnavailable(f"unexpected input {label or props.get('elem_id')!r} ({kind})")
    return args


def _observe(pane: PaneTiming, shown: str, now: float) -> None:
    body = shown.rstrip(CURSOR)
    stats = _STATS.search(body)
    if stats:
        body = body[: stats.start()]
    if body and body != pane.text:
        pane.chunk_times.append(now)
        pane.ttft_s = pane.ttft_s if pane.ttft_s is not None else now
        pane.text = body
    if stats and pane.end_s is None:
        pane.end_s, pane.tokens = now, int(stats.group(1))
        pane.server_ttft_s = float(stats.group(2)) if stats.group(2) else None
    if _ERROR in shown and pane.error is None:
        pane.error = shown.split(_ERROR, 1)[1].strip()[:200]


def _reply(output: Any) -> str:
    """The last assistant message's text from a Chatbot output (an update dict or the value)."""
    value = output.get("value", output) if isinstance(output, dict) else output
    if not isinstance(value, list):
        return ""
    for message in reversed(value):
        if isinstance(message, dict) and message.get("role") == "assistant":
            return _content_text(message.get("content"))
    return ""


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        return str(content.get("text", ""))
    if isinstance(content, list):
        return "".join(_content_text(part) for part in content)
    return ""
