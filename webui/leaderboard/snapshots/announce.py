"""What a new snapshot announces to a team's channel: its changes as a Slack-compatible message.

Pure: the changes between two snapshots (webui.leaderboard.snapshots.changes) and the board's
"most useful next comparison" sentence in, one JSON-ready dict out: `{"text": ..., "blocks":
[...]}`, where `text` is the whole message as plain mrkdwn (the notification, and what clients
without blocks show) and `blocks` the same in sections. Slack, Mattermost, Rocket.Chat and
Discord's Slack-compatible endpoint read it. A section's text stays under Slack's 3,000
characters: long lists are cut, with how many more.
"""

from __future__ import annotations

from typing import Any

from webui.leaderboard.snapshots.changes import Change, Changes, compared_views, newly_certain

MAX_LINES = 12  # per section; the rest are counted
SECTION_CHARS = 2900  # Slack refuses a section text over 3,000


def _escape(text: str) -> str:
    """Slack's three control characters in names (a model called `a<b>` must not become a link)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _line(change: Change) -> str:
    before, after, model = change.before, change.after, f"*{_escape(change.model)}*"
    if before is None and after is not None:
        rank = "unranked" if after.rank is None else f"rank {after.rank}"
        return f"{model} is new: {rank}, rating {after.rating:.0f} ({after.battles} battles)"
    if after is None and before is not None:
        return f"{model} is gone from the board (was rank {before.rank if before.rank is not None else '—'})"
    assert before is not None and after is not None
    steps = change.steps_up
    if steps:
        arrow = f"↑{steps}" if steps > 0 else f"↓{-steps}"
        return f"{model} {arrow}: rank {before.rank} → {after.rank} (rating {after.rating:.0f}, {change.delta:+.0f})"
    if before.rank != after.rank:
        return f"{model}: rank {before.rank if before.rank is not None else '—'} → {after.rank if after.rank is not None else '—'}"
    return f"{model}: rating {before.rating:.0f} → {after.rating:.0f} ({change.delta:+.0f})"


def _section(title: str, lines: list[str]) -> str:
    shown = lines[:MAX_LINES]
    if len(lines) > MAX_LINES:
        shown.append(f"… and {len(lines) - MAX_LINES} more")
    text = f"*{title}*\n" + "\n".join(f"• {line}" for line in shown)
    return text if len(text) <= SECTION_CHARS else text[: SECTION_CHARS - 1] + "…"


def sections(found: Changes, next_comparison: str = "") -> list[str]:
    """The message's parts in mrkdwn: a heading, then only the parts that have something to say."""
    added = found.battles_added
    heading = (
        f"*Leaderboard snapshot {found.after.created}*: {found.after.battles:,} battles counted "
        f"({added:+,} since {found.before.created})"
    )
    out = [heading]
    if found.settings:
        out.append(
            f"_Built with other settings than the last snapshot ({', '.join(found.settings)}): "
            "not every change is from votes._"
        )
    raw = [c for c in found.moved if c.view == "raw"] if "raw" in compared_views(found.before, found.after) else []
    new = [_line(c) for c in raw if c.kind == "new"]
    moved = [_line(c) for c in raw if c.kind == "moved" and c.steps_up]
    gone = [_line(c) for c in raw if c.kind == "gone"]
    certain = [f"*{_escape(a)}* is above *{_escape(b)}*" for a, b in newly_certain(found)]
    if not (new or moved or gone):
        out.append("No rank changed.")
    for title, lines in (
        ("New models", new),
        ("Rank changes", moved),
        ("Order now certain (95% intervals apart)", certain),
        ("Gone", gone),
    ):
        if lines:
            out.append(_section(title, lines))
    if next_comparison:
        out.append(_escape(next_comparison).replace("Most useful next comparison:", "*Most useful next comparison:*"))
    return out


def slack_message(found: Changes, next_comparison: str = "") -> dict[str, Any]:
    """`{"text", "blocks"}` for an incoming webhook (mrkdwn sections, one per part)."""
    parts = sections(found, next_comparison)
    return {
        "text": "\n\n".join(parts),
        "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": part}} for part in parts],
    }
