"""The Leaderboard tab: wiring only. `LeaderboardView` (webui.leaderboard.board.view) does the work,
plain Python tested without Gradio; a timer asks every few seconds whether a newer board exists.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import gradio as gr
import pandas as pd
from gradio.context import Context

from webui.access.operator import HOW_TO_ENABLE, OperatorRefused
from webui.access.ratelimit import RateLimited
from webui.arena.pairing import Evidence
from webui.config import Settings
from webui.errors import ConfigError
from webui.judge.calibration import agreement_markdown
from webui.judge.composite import composite_markdown
from webui.judge.records import read_verdicts
from webui.leaderboard.board.build import BoardOptions
from webui.leaderboard.board.export import parquet_available
from webui.leaderboard.board.view import EXPORTS, LeaderboardView
from webui.leaderboard.stats.categories import ALL
from webui.leaderboard.stats.families import family_prefixes
from webui.models.specs import load_judge
from webui.replay.verdicts import FOLDER as REPLAYS
from webui.ui.common import client_of, owner_of, progress_on

if TYPE_CHECKING:
    from webui.services import Services


REFRESH_EVERY_S = 5.0
PLOT_MIN_PX = 300
MORE_COLUMNS = "More columns: style control, P(above next), speeds, Elo, wins, ties, losses"
BOARD_TABLE = ["arena-board"]  # the page's stylesheet keeps these tables' headers from breaking inside words
OPERATOR_VIEWS = (
    "The voter check and the downloads (every battle with both conversations, preference pairs, ratings "
    "over time) are for the operator of this server"
)
EXPLAIN = (
    "Bradley-Terry ratings (400 points = 10x the odds of winning), 95% bootstrap intervals; rank = 1 + the "
    'number of models whose interval lies entirely above; "2–4": the ranks the interval allows. Ties count half. *P(above next)*: the probability '
    "that a model is rightly above the next ranked one; *More battles (next)*: about how many more battles "
    "between the two would separate them at 95%. *First token* and *Tokens/s*: medians over the judged "
    "replies, measured on this server's hardware. **Style control** holds reply "
    "length and markdown (headers, bold, lists) equal. Models with few battles are *preliminary*: "
    "likelihood-ratio interval, no rank. Battles where a reply named a model, failed or was stopped are "
    "left out; *What was left out* above says how many each filter left out."
)


def leaderboard_view(services: Services) -> LeaderboardView:
    """The server's live board, nudged by every vote the recorder writes."""
    settings = services.settings
    view = LeaderboardView(
        settings.log_dir,
        BoardOptions.from_settings(settings, services.registry.names()),
        database=settings.database,
        server=settings.server_name,
        lease_s=settings.board_lease_s,
        families=family_prefixes(settings.leaderboard_families),
        declared_families=_declared_families(services),
        declared=services.categories,
    )
    registry = services.registry
    view.serving = lambda: {s.name: s.fingerprint for s in registry.statuses() if s.fingerprint}
    listeners = getattr(services.recorder, "vote_listeners", None)
    if listeners is not None:  # a vote reaches the board at once, not at the next poll
        listeners.append(view.live.nudge)
    return view


def _declared_families(services: Services) -> dict[str, list[str]]:
    """The models file's `family:` keys: family -> its models."""
    families: dict[str, list[str]] = {}
    for name in services.registry.names():
        family = services.registry.spec(name).family
        if family:
            families.setdefault(family, []).append(name)
    return families


def pairing_evidence(view: LeaderboardView) -> Callable[[], Evidence | None]:
    """What smart pairing reads at each new battle: the view's tables as `Evidence`, converted once
    per board version (None: no board yet)."""
    converted: dict[int, Evidence] = {}

    def evidence() -> Evidence | None:
        tables = view.pairing_tables()
        if tables is None:
            return None
        if tables.version not in converted:
            converted.clear()  # one board version at a time
            converted[tables.version] = Evidence.from_tables(tables.ratings, tables.pair_counts)
        return converted[tables.version]

    return evidence


def build_leaderboard_tab(services: Services, view: LeaderboardView | None = None) -> None:
    """Place the leaderboard components inside the caller's `with gr.Tab(...)` block (`view`: the
    live board, when the caller shares it with smart pairing)."""
    view = view or leaderboard_view(services)
    first = view.outputs()

    summary_md = gr.Markdown(first[0])
    with gr.Row():
        category = gr.Dropdown(choices=first[9], value=ALL, label="Category", scale=3)
        refresh = gr.Button("Refresh", size="sm", scale=0)
    more = gr.Checkbox(False, label=MORE_COLUMNS, elem_id="leaderboard-more", container=False)
    table_df = gr.Dataframe(
        value=first[1],
        label="Leaderboard (anonymous battles)",
        interactive=False,
        wrap=True,
        elem_id="leaderboard-table",
        elem_classes=BOARD_TABLE,
    )
    style_md = gr.Markdown(first[2])
    with gr.Row():  # side by side on a desktop; one above the other on a phone (each needs ~300 px)
        rating_fig = gr.Plot(value=first[3], label="Ratings", min_width=PLOT_MIN_PX)
        heat_fig = gr.Plot(value=first[4], label="Win fraction", min_width=PLOT_MIN_PX)
    history_fig = gr.Plot(value=first[5], label="Ratings over time")
    with gr.Accordion("What was left out, and the categories", open=False):
        drops_df = gr.Dataframe(value=first[6], interactive=False, wrap=True, elem_classes=BOARD_TABLE)
        categories_df = gr.Dataframe(value=first[7], interactive=False, elem_classes=BOARD_TABLE)
    with gr.Accordion("Battles per pair of models", open=False):
        pairs_df = gr.Dataframe(value=first[8], interactive=False, elem_classes=BOARD_TABLE)
    gr.Markdown(EXPLAIN)
    shown = gr.State(first[10])
    outputs = [
        summary_md,
        table_df,
        style_md,
        rating_fig,
        heat_fig,
        history_fig,
        drops_df,
        categories_df,
        pairs_df,
        category,
        shown,
    ]
    _wire_refresh(view, refresh, category, shown, outputs, more)
    _compare_section(view)
    _my_votes_section(services, view)
    _agreement_section(view, _judge_weight(services.settings))
    _operator_section(services, view)


def _with_choices(values: tuple) -> list:
    out = list(values)
    out[9] = gr.update(choices=values[9])
    return out


def _wire_refresh(
    view: LeaderboardView,
    refresh: gr.Button,
    category: gr.Dropdown,
    shown: gr.State,
    outputs: list,
    more: gr.Checkbox,
) -> None:
    def on_refresh(chosen: str | None = ALL, more_columns: bool = False) -> list:
        return _with_choices(view.outputs(chosen or ALL, bool(more_columns)))

    def on_tick(current: int | None, chosen: str | None, more_columns: bool = False) -> Any:
        if not view.changed_since(current):
            return tuple(gr.skip() for _ in outputs)
        return _with_choices(view.outputs(chosen or ALL, bool(more_columns)))

    # Cheap unless the logs changed, so these need no generation slot: concurrency_limit=None.
    chosen = [category, more]
    refresh.click(on_refresh, inputs=chosen, outputs=outputs, api_name="leaderboard_refresh", concurrency_limit=None)
    category.input(on_refresh, inputs=chosen, outputs=outputs, api_name="leaderboard_category", concurrency_limit=None)
    more.input(on_refresh, inputs=chosen, outputs=outputs, api_name="leaderboard_columns", concurrency_limit=None)
    # Background refreshes keep their loading status off the tables and plots (webui.ui.common.progress_on).
    quiet = progress_on(gr.HTML(visible=False))
    gr.Timer(REFRESH_EVERY_S).tick(
        on_tick, inputs=[shown, *chosen], outputs=outputs, api_visibility="private", concurrency_limit=None, **quiet
    )
    parent = Context.block
    if isinstance(parent, gr.Tab):  # opening the tab shows the latest at once, not a tick later
        parent.select(
            on_tick,
            inputs=[shown, *chosen],
            outputs=outputs,
            api_visibility="private",
            concurrency_limit=None,
            **quiet,
        )


def _compare_section(view: LeaderboardView) -> None:
    def rows() -> list[str]:
        return [str(m) for m in view.board()[0].table["model"]]

    models = rows()
    with gr.Accordion("Is B better than A?", open=False):
        gr.Markdown(
            "Two rows of the board: the probability that B is the better model, the difference with its 95% "
            "interval, their head-to-head record, and about how many more battles would settle it."
        )
        with gr.Row():
            first = gr.Dropdown(choices=models, label="A", allow_custom_value=True, scale=2)
            second = gr.Dropdown(choices=models, label="B", allow_custom_value=True, scale=2)
            ask = gr.Button("Compare", size="sm", scale=0)
        answer = gr.Markdown()
    # the rows change as votes come in: the choices follow when the section is used
    first.focus(
        lambda: gr.update(choices=list(view.board()[0].table["model"])), outputs=first, api_visibility="private"
    )
    second.focus(
        lambda: gr.update(choices=list(view.board()[0].table["model"])), outputs=second, api_visibility="private"
    )
    ask.click(view.compare, inputs=[first, second], outputs=answer, api_name="leaderboard_compare", concurrency_limit=1)


def _my_votes_section(services: Services, view: LeaderboardView) -> None:
    with gr.Accordion("My votes", open=False):
        gr.Markdown(
            "Your own board, from the battle votes cast in this browser session only (signed in: from your votes "
            "on every browser and device)."
        )
        show = gr.Button("Show my votes", size="sm")
        note = gr.Markdown()
        table = gr.Dataframe(interactive=False, elem_classes=BOARD_TABLE)

    def mine(request: gr.Request) -> tuple[str, pd.DataFrame]:
        client = client_of(request, services.settings)
        key = services.recorder.session_key(str(owner_of(request).session_hash or ""), client.user)
        return view.my_votes(key, signed_in=bool(client.user))

    show.click(mine, outputs=[note, table], api_name="leaderboard_my_votes", concurrency_limit=None)


def _agreement_section(view: LeaderboardView, judge_weight: float | str) -> None:
    with gr.Accordion("Agreement: a judge model against the votes", open=False):
        gr.Markdown(
            "How often a judge model's verdicts on these battles match the people's votes, with 95% "
            "intervals: with and without ties, Cohen's kappa (0: no better than chance), whether it gives "
            "the same verdict whichever reply is shown first, and its board against yours (docs/judge.md). "
            "The composite board counts the judge's verdicts beside the votes, each weighing "
            f"{judge_weight} (a vote: 1)."
        )
        with gr.Row():
            show = gr.Button("Show agreement", size="sm")
            both = gr.Button("Show the composite board", size="sm")
        figures = gr.Markdown()

    def agreement() -> str:
        return agreement_markdown(read_verdicts(view.log_dir), view.live.index)

    def composite() -> str:
        return composite_markdown(read_verdicts(view.log_dir), view.live.index, judge_weight, view.log_dir / REPLAYS)

    # Bootstraps and fits over every judged battle: a second or more, so one at a time.
    show.click(agreement, outputs=figures, api_name="leaderboard_agreement", concurrency_limit=1)
    both.click(composite, outputs=figures, api_name="leaderboard_composite", concurrency_limit=1)


def _judge_weight(settings: Settings) -> float | str:
    """The models file's judge: block's weight, else auto (a broken file never gets this far)."""
    try:
        block = load_judge(settings.models_file)
    except ConfigError:
        return "auto"
    return block.weight if block is not None else "auto"


def operator_off_note(settings: Settings) -> str:
    """What the operator accordion says when its views are off, and how to turn them on."""
    if settings.ui_export == "off":
        return f"{OPERATOR_VIEWS}; `--ui-export off` turns them off here."
    return f"{OPERATOR_VIEWS} and are off: to offer them, {HOW_TO_ENABLE} (docs/leaderboard.md)."


def _operator_section(services: Services, view: LeaderboardView) -> None:
    """Voters and downloads concern everyone's behaviour and prompts. The accordion is there for
    everyone, but each of its events answers only a request that carries the operator key
    (webui.access.operator); with no key configured the events are not wired at all, so there is
    no API name to call, and the accordion says how to turn them on."""
    with gr.Accordion("Operator: voters, downloads and favoured pairs", open=False):
        if not services.operator.enabled:
            gr.Markdown(operator_off_note(services.settings))
            return
        named = bool(services.operator.operators)  # signed-in people named by --operators need no key
        gr.Markdown(
            "For this arena's operators, the people `--operators` names: sign in as one of them."
            if named
            else "For the operator of this server: each button here needs the operator key "
            "(`ARENA_OPERATOR_KEY` or `--operator-key-file`); a wrong one is refused."
        )
        key = gr.Textbox(label="Operator key", type="password", max_lines=1, elem_id="operator-key", visible=not named)
        gr.Markdown(
            "Voters whose votes disagree with everyone else's ratings far beyond chance are flagged "
            "(docs/leaderboard.md). `--leaderboard-exclude-flagged` leaves their votes out."
        )
        check = gr.Button("Check voters", size="sm")
        voters_df = gr.Dataframe(interactive=False, elem_classes=BOARD_TABLE)
        gr.Markdown(
            "Downloads: battles (every battle vote with both conversations, and the reason it was left out, "
            "if it was), preference pairs for DPO-style training (prompt, chosen, rejected), ratings over time."
        )
        with gr.Row():
            buttons = {
                kind: gr.Button(f"{name}", size="sm")
                for kind, (name, _) in EXPORTS.items()
                if parquet_available() or not name.endswith(".parquet")
            }
            history = gr.Button("ratings_over_time.csv", size="sm")
        download = gr.File(label="Download", interactive=False)
        gr.Markdown(
            "Favour a pair: a share of the next battles draws these two (still blind, among others) until "
            "this many more battles between them are counted, e.g. to settle *Is B better than A?* or to "
            "confirm a family's best against its runner-up."
        )
        models = [str(m) for m in view.board()[0].table["model"]]
        with gr.Row():
            favour_a = gr.Dropdown(choices=models, label="A", allow_custom_value=True, scale=2)
            favour_b = gr.Dropdown(choices=models, label="B", allow_custom_value=True, scale=2)
            favour_n = gr.Number(100, label="battles", precision=0, minimum=1, scale=1)
            favour = gr.Button("Favour", size="sm", scale=0)
        favoured = gr.Markdown()
    check.click(
        _operator_only(services, view.voters),
        inputs=key,
        outputs=voters_df,
        api_name="leaderboard_voters",
        concurrency_limit=None,
    )
    for kind, button in buttons.items():
        button.click(
            _operator_only(services, functools.partial(view.export, kind)),
            inputs=key,
            outputs=download,
            api_name=f"export_{kind}",
        )
    history.click(
        _operator_only(services, view.history_csv), inputs=key, outputs=download, api_name="export_history_csv"
    )
    for dropdown in (favour_a, favour_b):  # the rows change as votes come in
        dropdown.focus(
            lambda: gr.update(choices=list(view.board()[0].table["model"])), outputs=dropdown, api_visibility="private"
        )

    def on_favour(key: str | None, a: str | None, b: str | None, battles: float | None, request: gr.Request) -> str:
        _admit(services, key, request)
        return view.favour(a, b, battles)

    favour.click(on_favour, inputs=[key, favour_a, favour_b, favour_n], outputs=favoured, api_name="leaderboard_favour")


def _operator_only(services: Services, produce: Callable[[], Any]) -> Callable[..., Any]:
    """An event handler that runs `produce` only for a request carrying the operator key: the key
    is the event's input, so the page and a REST call (no cookie, a session of its own) prove it
    the same way. Nothing is computed, and no file written, before the key is admitted."""

    def handler(key: str | None, request: gr.Request) -> Any:
        _admit(services, key, request)
        return produce()

    return handler


def _admit(services: Services, key: str | None, request: gr.Request) -> None:
    """Refuse, with a message that names no data, a request that does not carry the operator key
    (or come from a named operator)."""
    try:
        services.operator.admit(key, client_of(request, services.settings))
    except (OperatorRefused, RateLimited) as exc:  # their messages name no data, only what to do
        raise gr.Error(str(exc), print_exception=False) from None
