"""The Gradio Blocks UI: Battle, Side by side, Direct chat, Leaderboard and About tabs.

`?tab=side_by_side` (or battle, direct, leaderboard, about) opens a tab directly. Model names and
statuses are never part of the page config: a timer fills them in, and only for the tab on show —
the Battle tab gets counts alone, so its page never names a model before the vote.

The three chat tabs are one layout (webui/ui/chat_layout.py), one set of named inputs
(webui/ui/chat_inputs.py), one view (webui/ui/chat_view.py) and one wiring (webui/ui/tab.py, with
the pane events in webui/ui/chat_panes.py), with different modes and pane counts; the page's
stylesheet and keys come from webui/ui/page.py.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import gradio as gr

from webui.arena.handlers import Handlers
from webui.engine.registry import ModelState
from webui.leaderboard.board.favours import FavourFile
from webui.records.events import Mode
from webui.records.prepared import PreparedPairs
from webui.ui import page, preview, views
from webui.ui.about import build_about_tab
from webui.ui.chat_layout import ChatLayout
from webui.ui.common import INTERNAL, in_order, owner_of, progress_on
from webui.ui.leaderboard_tab import build_leaderboard_tab, leaderboard_view, pairing_evidence
from webui.ui.tab import build_tab

if TYPE_CHECKING:
    from webui.leaderboard.board.view import LeaderboardView
    from webui.services import Services

TABS = ("battle", "side_by_side", "direct", "leaderboard", "about")
ALIASES = {
    "sbs": "side_by_side",
    "side-by-side": "side_by_side",
    "side": "side_by_side",
    "chat": "direct",
    "arena": "battle",
    "anonymous": "battle",
    "ranking": "leaderboard",
}
CHAT_TABS: tuple[Mode, ...] = ("battle", "side_by_side", "direct")
STATUS_EVERY_S = 2.0


def tab_from_query(query: Mapping[str, str] | None) -> str:
    wanted = (query or {}).get("tab", "").strip().lower()
    wanted = ALIASES.get(wanted, wanted)
    return wanted if wanted in TABS else "battle"


def build_ui(services: Services, handlers: Handlers | None = None, board: LeaderboardView | None = None) -> gr.Blocks:
    # the Leaderboard tab shows it; smart pairing reads it; the server's snapshot schedule takes it
    board = board or leaderboard_view(services)
    favoured = FavourFile(services.settings.log_dir)
    handlers = handlers or Handlers(
        services,
        evidence=pairing_evidence(board),
        favoured=favoured,
        prepared=PreparedPairs(services.settings.log_dir),
    )
    with gr.Blocks(title=preview.TITLE) as blocks:
        gr.Markdown("# ⚔️ Pairwise Arena", elem_classes=["arena-title"])
        current = gr.State("battle")
        seen = gr.State(None)  # what the status outputs last showed, so that unchanged ones are skipped
        tab_blocks: dict[str, gr.Tab] = {}
        chats: dict[Mode, ChatLayout] = {}
        # Gradio's default hides the tabs that do not fit behind "⋯": on a phone that was Leaderboard
        # and About. Wrapped, every tab's name shows (two rows at 390 px, one on a desktop).
        with gr.Tabs(selected="battle", overflow_behavior="wrap") as tabs:
            for mode, title in zip(CHAT_TABS, ("⚔️ Battle", "👥 Side by side", "💬 Direct chat"), strict=True):
                with gr.Tab(title, id=mode) as tab_blocks[mode]:
                    chats[mode] = build_tab(services, handlers, mode)
            with gr.Tab("🏆 Leaderboard", id="leaderboard") as tab_blocks["leaderboard"]:
                build_leaderboard_tab(services, board)
            with gr.Tab("ℹ️ About", id="about") as tab_blocks["about"]:
                build_about_tab(services)
        _install_page(list(chats.values()))
        _wire_status(services, handlers, blocks, tabs, current, seen, chats, tab_blocks)
        _stop_on_close(services, blocks)
    blocks.queue()
    return blocks


def _stop_on_close(services: Services, blocks: gr.Blocks) -> None:
    """A closed (or reloaded) tab stops its session's generations: Gradio ends a run whose event
    stream drops, but not one whose stream had not connected yet when the tab closed; the page's
    heartbeat connection, dropped with the tab, triggers `unload` either way."""

    def on_unload(request: gr.Request) -> None:
        session_hash = getattr(request, "session_hash", None)
        if session_hash:
            services.generations.stop_session(session_hash)

    blocks.unload(on_unload)


def _install_page(chats: Sequence[ChatLayout]) -> None:
    """The stylesheet and the keys: Esc presses the Stop of the tab on show, 1-4 its votes."""
    keys: dict[str, list[str]] = {}
    for chat in chats:
        for button, vote in zip(chat.votes, chat.kind.votes, strict=True):
            keys.setdefault(vote.key, []).append(button.elem_id or "")
    page.install([c.stop.elem_id or "" for c in chats], keys, [c.text.elem_id or "" for c in chats])


@dataclass(frozen=True)
class StatusOutputs:
    """What the status timer draws: each chat tab's model status and the model dropdowns."""

    seen: Any  # gr.State: what the outputs last showed, so that unchanged ones are skipped
    battle: Any
    battle_prepared: Any  # the Battle tab's "prepared question" button: shown while a pair waits
    side_by_side: Any
    sbs_models: Sequence[Any]
    direct: Any
    direct_model: Any

    def components(self) -> list[Any]:
        return [
            self.seen,
            self.battle,
            self.battle_prepared,
            self.side_by_side,
            *self.sbs_models,
            self.direct,
            self.direct_model,
        ]


def _wire_status(
    services: Services,
    handlers: Handlers,
    blocks: gr.Blocks,
    tabs: gr.Tabs,
    current: gr.State,
    seen: gr.State,
    chats: Mapping[Mode, ChatLayout],
    tab_blocks: Mapping[str, gr.Tab],
) -> None:
    sbs, direct = chats["side_by_side"], chats["direct"]
    (direct_model,) = direct.dropdowns
    battle_prepared = chats["battle"].prepared
    assert battle_prepared is not None, "the Battle tab has a prepared-question button"
    drawn = StatusOutputs(
        seen=seen,
        battle=chats["battle"].status,
        battle_prepared=battle_prepared,
        side_by_side=sbs.status,
        sbs_models=sbs.dropdowns,
        direct=direct.status,
        direct_model=direct_model,
    )
    status_outputs = drawn.components()
    dropdowns = [*sbs.dropdowns, *direct.dropdowns]
    states, modes = [c.state for c in chats.values()], list(chats)
    quiet = progress_on(gr.HTML(visible=False))

    def refresh(tab: str, last: Any, *chosen: str | None) -> list[Any]:
        waiting = tab == "battle" and handlers.prepared is not None and bool(handlers.prepared.pending())
        return in_order(status_outputs, status_updates(services, tab, last, chosen, drawn, prepared_waiting=waiting))

    def on_load(request: gr.Request, last: Any, *values: Any) -> list[Any]:
        """Opens the tab named in ?tab=, and creates each tab's session (owned by this page's
        session hash) in the same response that sets the dropdowns: their change events, which
        arrive together, then share one session instead of racing to create one each."""
        current_sessions, chosen = values[: len(states)], values[len(states) :]
        owner = owner_of(request)
        created = [handlers.session_for(s, m, owner) for s, m in zip(current_sessions, modes, strict=True)]
        tab = tab_from_query(getattr(request, "query_params", None))
        return [gr.Tabs(selected=tab), tab, *created, *refresh(tab, last, *chosen)]

    blocks.load(
        on_load,
        [seen, *states, *dropdowns],
        [tabs, current, *states, *status_outputs],
        api_name="app_load",
        concurrency_limit=None,
        **quiet,
        **INTERNAL,
    )
    for tab_id, tab in tab_blocks.items():

        def on_select(last: Any, *chosen: str | None, tab_id: str = tab_id) -> list[Any]:
            return [tab_id, *refresh(tab_id, last, *chosen)]

        tab.select(
            on_select,
            [seen, *dropdowns],
            [current, *status_outputs],
            api_name=f"app_tab_{tab_id}",
            concurrency_limit=None,
            **quiet,
            **INTERNAL,
        )
    timer = gr.Timer(STATUS_EVERY_S)
    timer.tick(
        refresh,
        [current, seen, *dropdowns],
        status_outputs,
        api_name="app_status",
        concurrency_limit=None,
        **quiet,
        **INTERNAL,
    )


def status_updates(
    services: Services,
    tab: str,
    last: Any,
    chosen: Sequence[str | None],
    drawn: StatusOutputs,
    *,
    prepared_waiting: bool = False,
) -> dict[Any, Any]:
    """{component of `drawn`: update}: only for the tab on show, and only when something changed.
    `chosen` is what the model dropdowns (side by side's, then direct's) showed when the timer
    fired. An empty dropdown gets a ready model (the k-th, or the last when there are fewer); one
    with a model gets new choices only: a model picked since the timer fired must not be put back."""
    statuses = services.registry.statuses()
    signature = (
        tab,
        tuple((s.name, s.state.value, s.reason) for s in statuses),
        tuple(bool(c) for c in chosen),
        prepared_waiting,
    )
    out: dict[Any, Any] = {component: gr.skip() for component in drawn.components()}
    if signature == last:
        return out
    out[drawn.seen] = signature
    ready = [s.name for s in statuses if s.state is ModelState.READY]
    choices = views.model_choices(statuses)
    if tab == "battle":
        out[drawn.battle] = views.anonymous_status(statuses)
        out[drawn.battle_prepared] = gr.update(visible=prepared_waiting)
    elif tab == "side_by_side":
        out[drawn.side_by_side] = views.status_markdown(statuses)
        for k, dropdown in enumerate(drawn.sbs_models):
            out[dropdown] = _dropdown(choices, chosen[k], ready[min(k, len(ready) - 1)] if ready else None)
    elif tab == "direct":
        out[drawn.direct] = views.status_markdown(statuses)
        out[drawn.direct_model] = _dropdown(choices, chosen[len(drawn.sbs_models)], ready[0] if ready else None)
    return out


def _dropdown(choices: list[tuple[str, str]], chosen: str | None, default: str | None) -> dict[str, Any]:
    return gr.update(choices=choices) if chosen else gr.update(choices=choices, value=default)
