"""What a session looks like on screen, as plain data: chat messages (OpenAI-style dicts for
`gr.Chatbot`), the statistics line under each reply, pane labels, the reveal, and the notes near the
vote buttons.

Pure functions of the session, so that the rule "nothing that tells the models apart before the
vote" can be checked on exactly what the browser receives, without Gradio.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from webui.arena import rules as arena
from webui.arena.replies import GENERIC_FAILURE
from webui.arena.rules import PANE_LABELS, Pane, Reply, Session
from webui.engine.registry import ModelState, ModelStatus
from webui.types import VOTES, Finished, FinishReason, Vote

CURSOR = "▌"
REASONS = {
    FinishReason.STOP: "finished",
    FinishReason.LENGTH: "length limit reached",
    FinishReason.CANCELLED: "⏹ stopped",
    FinishReason.ERROR: "error",
}
STOPPED_NOT_COUNTED = (
    "A reply was stopped before it ended: you can still vote, but the leaderboard leaves "
    "out battles with a stopped reply."
)
MORE_THAN_TWO = "Votes compare two models: show two panes to vote."


def stats_line(final: Finished, *, anonymous: bool = False) -> str:
    """tokens · time to first token · tokens/s · finish reason. Before a battle's vote only the
    finish reason: token counts come from each model's own tokenizer, and speeds from its size and
    placement, so the exact figures would fingerprint a model (docs/ui.md)."""
    if anonymous:
        return REASONS[final.reason]
    parts = [f"{final.completion_tokens} tokens"]
    if final.ttft_s is not None:
        parts.append(f"first token {final.ttft_s:.2f} s")
    if final.tokens_per_s is not None:
        parts.append(f"{final.tokens_per_s:.1f} tokens/s")
    parts.append(REASONS[final.reason])
    return " · ".join(parts)


def reply_markdown(reply: Reply, *, anonymous: bool = False) -> str:
    """The reply as shown: the text stripped at both ends (a chat template that always leaves a
    trailing newline, or a leading space, would otherwise mark its model before the vote), then the
    cursor while it streams, the statistics once it ended, or what went wrong."""
    text = reply.text.strip()
    if reply.error is not None:
        return f"{_close_fences(text)}\n\n⚠️ {reply.error}" if text else f"⚠️ {reply.error}"
    if reply.final is None:
        return f"{text}{CURSOR}"
    if reply.final.reason is FinishReason.ERROR:
        return f"{_close_fences(text)}\n\n⚠️ {GENERIC_FAILURE}"
    return f"{_close_fences(text)}\n\n<sub>{stats_line(reply.final, anonymous=anonymous)}</sub>"


def _close_fences(text: str) -> str:
    """A reply cut off (stopped, or at the length limit) inside a code block would swallow the
    statistics line: close the block first."""
    if text.count("```") % 2 == 1:
        return f"{text}\n```"
    return text


def _text(content: str) -> dict[str, str]:
    """Message content as a text part: Gradio passes it through as is (a bare string goes through
    `inspect.cleandoc`, which would dedent code in a reply)."""
    return {"type": "text", "text": content}


def chat_messages(pane: Pane, *, anonymous: bool = False) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for turn in pane.turns:
        messages.append({"role": "user", "content": _text(turn.user)})
        messages.append({"role": "assistant", "content": _text(reply_markdown(turn.reply, anonymous=anonymous))})
    return messages


def pane_label(session: Session | None, index: int, mode: str) -> str:
    """'Model A' / 'Model B' until a battle's vote; then (and in named modes) with the name."""
    if mode == "direct":
        return "Chat"
    base = PANE_LABELS[index]
    if session is None or session.anonymous or index >= len(session.panes) or session.panes[index].model is None:
        return base
    return f"{base}: {session.panes[index].model}"


def reveal_markdown(session: Session | None) -> str:
    """After a battle's vote: the names, and the settings each model used (the box "use the
    model's own settings" promised them hidden only until the vote)."""
    if session is None or session.mode != "battle" or not session.revealed:
        return ""
    a, b = (p.model for p in session.panes)
    return (
        f"### Model A was **{a}** and Model B was **{b}**.\n"
        f"{settings_table(session)}\n\nPress **New round** to battle two more."
    )


def settings_table(session: Session) -> str:
    """The newest turn's settings of every pane, as a Markdown table."""
    turns = [p.turns[-1] if p.turns else None for p in session.panes]
    head = "| setting | " + " | ".join(f"{PANE_LABELS[i]}: {p.model}" for i, p in enumerate(session.panes)) + " |"
    rows = [head, "|---" * (len(turns) + 1) + "|"]
    for name in arena.SAMPLING_CONTROLS:
        rows.append(f"| {name} | " + " | ".join(_setting(t, name) for t in turns) + " |")
    rows.append("| system prompt | " + " | ".join(_system(t) for t in turns) + " |")
    return "\n".join(rows)


def _setting(turn: arena.Turn | None, name: str) -> str:
    if turn is None:
        return "—"
    value = getattr(turn.params, name)
    return "random" if name == "seed" and value is None else f"{value:g}" if isinstance(value, float) else str(value)


def _system(turn: arena.Turn | None) -> str:
    if turn is None:
        return "—"
    text = turn.system_used.replace("|", "\\|").replace("\n", " ")
    return f"“{text[:117] + '...' if len(text) > 120 else text}”" if text else "(none)"


def chosen_votes(session: Session | None) -> tuple[Vote, ...]:
    """The votes cast on the newest turn (a thumb and a flag in direct chat): their buttons stay
    marked as chosen until the next turn."""
    cast = session.votes.get(session.turn_no, set()) if session is not None else set()
    return tuple(vote for vote in VOTES if vote.kind in cast)


def recorded_note(chosen: Sequence[Vote]) -> str:
    """The confirmation under the buttons: which vote was taken, in the buttons' own words."""
    if not chosen:
        return ""
    return f"✓ {'Votes' if len(chosen) > 1 else 'Vote'} recorded: {' · '.join(v.button for v in chosen)}. Thank you!"


def vote_note(session: Session | None, *, drop_stopped: bool, counts_named: bool) -> str:
    """What the voter should know at the vote: that the vote was recorded (and which), that a vote
    on stopped replies will not count on the leaderboard (where it would count at all), or why
    there is nothing to vote on."""
    if session is None:
        return ""
    if session.mode != "direct" and len(session.panes) > 2:
        return MORE_THAN_TWO
    notes = [recorded_note(chosen_votes(session))]
    counted = session.mode == "battle" or (session.mode == "side_by_side" and counts_named)
    if counted and drop_stopped and arena.stopped_in_turn(session) and session.replies_done():
        notes.append(STOPPED_NOT_COUNTED)
    return "  \n".join(note for note in notes if note)


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
    icons = {
        ModelState.READY: "🟢",
        ModelState.LOADING: "⏳",
        ModelState.QUEUED: "⏳",
        ModelState.FAILED: "🔴",
        ModelState.UNLOADED: "⚪",
    }
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
        return (
            s.name if s.state is ModelState.READY else f"{s.name} ({state if len(state) <= 60 else state[:57] + '...'})"
        )

    return [(label(s), s.name) for s in statuses]
