"""The Gradio Blocks UI: Battle, Side by side, Direct chat, Leaderboard and About tabs.

`?tab=side_by_side` (or battle, direct, leaderboard, about) opens a tab directly. Model names and
statuses are never part of the page config: a timer fills them in, and only for the tab on show —
the Battle tab gets counts alone, so its page never names a model before the vote.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import gradio as gr

from webui.arena.handlers import Handlers
from webui.engine.registry import ModelState
from webui.ui import views
from webui.ui.about import build_about_tab
from webui.ui.battle import build_battle_tab
from webui.ui.common import owner_of
from webui.ui.leaderboard_tab import build_leaderboard_tab
from webui.ui.named import NamedTab, build_named_tab

if TYPE_CHECKING:
    from webui.services import Services

TABS = ("battle", "side_by_side", "direct", "leaderboard", "about")
ALIASES = {"sbs": "side_by_side", "side-by-side": "side_by_side", "side": "side_by_side", "chat": "direct",
           "arena": "battle", "anonymous": "battle", "ranking": "leaderboard"}
STATUS_EVERY_S = 2.0


def tab_from_query(query: Mapping[str, str] | None) -> str:
    wanted = (query or {}).get("tab", "").strip().lower()
    wanted = ALIASES.get(wanted, wanted)
    return wanted if wanted in TABS else "battle"


def build_ui(services: Services, handlers: Handlers | None = None) -> gr.Blocks:
    handlers = handlers or Handlers(services)
    with gr.Blocks(title="Pairwise Arena") as blocks:
        gr.Markdown("# ⚔️ Pairwise Arena")
        current = gr.State("battle")
        seen = gr.State(None)  # what the status outputs last showed, so that unchanged ones are skipped
        with gr.Tabs(selected="battle") as tabs:
            with gr.Tab("⚔️ Battle", id="battle") as battle_tab:
                battle = build_battle_tab(services, handlers)
            with gr.Tab("👥 Side by side", id="side_by_side") as sbs_tab:
                sbs = build_named_tab(services, handlers, "side_by_side")
            with gr.Tab("💬 Direct chat", id="direct") as direct_tab:
                direct = build_named_tab(services, handlers, "direct")
            with gr.Tab("🏆 Leaderboard", id="leaderboard") as leaderboard_tab:
                build_leaderboard_tab(services)
            with gr.Tab("ℹ️ About", id="about") as about_tab:
                build_about_tab(services)
        sessions = {"battle": battle.state, "side_by_side": sbs.state, "direct": direct.state}
        _wire_status(services, handlers, blocks, tabs, current, seen, battle.status, sbs, direct, sessions,
                     {"battle": battle_tab, "side_by_side": sbs_tab, "direct": direct_tab,
                      "leaderboard": leaderboard_tab, "about": about_tab})
    blocks.queue()
    return blocks


def _wire_status(services: Services, handlers: Handlers, blocks: gr.Blocks, tabs: gr.Tabs, current: gr.State,
                 seen: gr.State, battle_status: gr.Markdown, sbs: NamedTab, direct: NamedTab,
                 sessions: Mapping[str, gr.State], tab_blocks: Mapping[str, gr.Tab]) -> None:
    status_outputs = [seen, battle_status, sbs.status, *sbs.dropdowns, direct.status, *direct.dropdowns]
    dropdowns = [*sbs.dropdowns, *direct.dropdowns]
    states, modes = list(sessions.values()), list(sessions)

    def refresh(tab: str, last: Any, *chosen: str | None) -> list[Any]:
        return status_updates(services, tab, last, chosen)

    def on_load(request: gr.Request, last: Any, *values: Any) -> list[Any]:
        """Opens the tab named in ?tab=, and creates each tab's session (owned by this page's
        session hash) in the same response that sets the dropdowns: their change events, which
        arrive together, then share one session instead of racing to create one each."""
        current_sessions, chosen = values[:len(states)], values[len(states):]
        owner = owner_of(request)
        created = [handlers.session_for(s, m, owner) for s, m in zip(current_sessions, modes, strict=True)]
        tab = tab_from_query(getattr(request, "query_params", None))
        return [gr.Tabs(selected=tab), tab, *created, *refresh(tab, last, *chosen)]

    blocks.load(on_load, [seen, *states, *dropdowns], [tabs, current, *states, *status_outputs], api_name="app_load",
                show_progress="hidden", concurrency_limit=None)
    for tab_id, tab in tab_blocks.items():
        def on_select(last: Any, *chosen: str | None, tab_id: str = tab_id) -> list[Any]:
            return [tab_id, *refresh(tab_id, last, *chosen)]
        tab.select(on_select, [seen, *dropdowns], [current, *status_outputs], api_name=f"app_tab_{tab_id}",
                   show_progress="hidden", concurrency_limit=None)
    timer = gr.Timer(STATUS_EVERY_S)
    timer.tick(refresh, [current, seen, *dropdowns], status_outputs, api_name="app_status",
               show_progress="hidden", concurrency_limit=None)


def status_updates(services: Services, tab: str, last: Any, chosen: tuple[str | None, ...]) -> list[Any]:
    """Updates for [seen, battle status, side-by-side status, its two dropdowns, direct status, its
    dropdown]: only for the tab on show, and only when something changed."""
    statuses = services.registry.statuses()
    signature = (tab, tuple((s.name, s.state.value, s.reason) for s in statuses), tuple(bool(c) for c in chosen))
    out: list[Any] = [gr.skip()] * 7
    if signature == last:
        return out
    out[0] = signature
    ready = [s.name for s in statuses if s.state is ModelState.READY]
    choices = views.model_choices(statuses)
    if tab == "battle":
        out[1] = views.anonymous_status(statuses)
    elif tab == "side_by_side":
        out[2] = views.status_markdown(statuses)
        for k in range(2):
            value = chosen[k] or (ready[min(k, len(ready) - 1)] if ready else None)
            out[3 + k] = gr.update(choices=choices, value=value)
    elif tab == "direct":
        out[5] = views.status_markdown(statuses)
        out[6] = gr.update(choices=choices, value=chosen[2] or (ready[0] if ready else None))
    return out
