"""What a session looks like on screen, as plain data: chat messages (OpenAI-style dicts for
`gr.Chatbot`), the statistics line under each reply, pane labels and the reveal text.

Pure functions of the session, so that the rule "no model name before the vote" can be checked
on exactly what the browser receives, without Gradio.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from webui.arena.rules import PANE_LABELS, Pane, Reply, Session
from webui.engine.registry import ModelState, ModelStatus
from webui.types import Finished, FinishReason

CURSOR = "▌"
REASONS = {
    FinishReason.STOP: "finished",
    FinishReason.LENGTH: "length limit reached",
    FinishReason.CANCELLED: "⏹ stopped",
    FinishReason.ERROR: "error",
}


def stats_line(final: Finished) -> str:
    """tokens · time to first token · tokens/s · finish reason."""
    parts = [f"{final.completion_tokens} tokens"]
    if final.ttft_s is not None:
        parts.append(f"first token {final.ttft_s:.2f} s")
    if final.tokens_per_s is not None:
        parts.append(f"{final.tokens_per_s:.1f} tokens/s")
    parts.append(REASONS[final.reason])
    return " · ".join(parts)


def reply_markdown(reply: Reply) -> str:
    if reply.error is not None:
        body = f"{reply.text}\n\n" if reply.text else ""
        return f"{_close_fences(body)}⚠️ {reply.error}"
    if reply.final is None:
        return f"{reply.text}{CURSOR}"
    if reply.final.reason is FinishReason.ERROR:
        return f"{_close_fences(reply.text)}\n\n⚠️ {GENERIC_FAILURE}"
    return f"{_close_fences(reply.text)}\n\n<sub>{stats_line(reply.final)}</sub>"


def _close_fences(text: str) -> str:
    """A reply cut off (stopped, or at the length limit) inside a code block would swallow the
    statistics line: close the block first."""
    if text.count("```") % 2 == 1:
        return f"{text}\n```"
    return text


def chat_messages(pane: Pane) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for turn in pane.turns:
        messages.append({"role": "user", "content": turn.user})
        messages.append({"role": "assistant", "content": reply_markdown(turn.reply)})
    return messages


def pane_label(session: Session | None, index: int, mode: str) -> str:
    """'Model A' / 'Model B' until a battle's vote; then (and in named modes) with the name."""
    if mode == "direct":
        return "Chat"
    base = PANE_LABELS[index]
    if session is None or session.anonymous or session.panes[index].model is None:
        return base
    return f"{base}: {session.panes[index].model}"


def reveal_markdown(session: Session | None) -> str:
    if session is None or session.mode != "battle" or not session.revealed:
        return ""
    a, b = (p.model for p in session.panes)
    return f"### Model A was **{a}** and Model B was **{b}**.\nPress **New round** to battle two more."


def last_prompt(pane: Pane) -> str:
    """The exact prompt the template produced for the newest reply (named modes only)."""
    for turn in reversed(pane.turns):
        if turn.reply.final is not None and turn.reply.final.prompt:
            return turn.reply.final.prompt
    return ""


def status_markdown(statuses: Sequence[ModelStatus]) -> str:
    """Every model with its state (named modes)."""
    if not statuses:
        return "No models are configured."
    icons = {ModelState.READY: "🟢", ModelState.LOADING: "⏳", ModelState.QUEUED: "⏳",
             ModelState.FAILED: "🔴", ModelState.UNLOADED: "⚪"}
    return "  \n".join(f"{icons[s.state]} **{s.name}**: {s.describe()}" for s in statuses)


def anonymous_status(statuses: Sequence[ModelStatus]) -> str:
    """Counts only: the battle tab says whether battles can start without naming anyone."""
    ready = sum(s.state is ModelState.READY for s in statuses)
    loading = sum(s.state in (ModelState.LOADING, ModelState.QUEUED) for s in statuses)
    failed = sum(s.state is ModelState.FAILED for s in statuses)
    parts = [f"{ready} model{'s' if ready != 1 else ''} ready"]
    if loading:
        parts.append(f"{loading} loading")
    if failed:
        parts.append(f"{failed} failed")
    note = "" if ready >= 2 else " — a battle needs two ready models; please wait."
    return "Models: " + ", ".join(parts) + note


def model_choices(statuses: Sequence[ModelStatus]) -> list[tuple[str, str]]:
    """Dropdown entries: every model with its state; only ready ones can be chosen (the handler
    refuses the others)."""
    def label(s: ModelStatus) -> str:
        state = s.describe()
        return s.name if s.state is ModelState.READY else f"{s.name} ({state if len(state) <= 60 else state[:57] + '...'})"
    return [(label(s), s.name) for s in statuses]


GENERIC_FAILURE = "This model could not answer. Try Regenerate, or start a new round."
