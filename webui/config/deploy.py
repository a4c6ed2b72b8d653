"""The settings table, last part: several servers, sign-in, rate limits, Hub sync, snapshots and
the stop (docs/deploy.md). Rows are in the order --help lists them."""

from __future__ import annotations

from dataclasses import dataclass

from webui.config.option import setting
from webui.config.values import (
    OFF_OR_MORE,
    POSITIVE,
    UI_EXPORT_MODES,
    Rule,
    check_database,
    check_duration,
    check_header,
    check_names,
    check_server_name,
    check_webhook,
)


@dataclass(frozen=True)
class DeploySettings:
    """A part of `Settings` (webui/config/settings.py), never made on its own."""

    # Several servers, one board (docs/deploy.md): the vote index in a PostgreSQL database instead of the SQLite
    # file beside the logs, and this server's name, which its log file names carry.
    database: str = setting(
        "",
        flag="--database",
        check=check_database,
        private=True,  # the URL may hold a password
        help="keep the vote index in this PostgreSQL database (postgresql://USER@HOST:PORT/DBNAME), shared by "
        "several servers; default: an SQLite file beside the logs. Needs --server-name",
    )
    server_name: str = setting(
        "",
        flag="--server-name",
        check=check_server_name,
        help="this server's name among those sharing --database; its log files are named YYYY-MM-DD-NAME-conv.json",
    )
    board_lease_s: float = setting(
        30.0,
        flag="--board-lease-s",
        help="with --database, one server builds the board; when it falls silent this long (it died), another "
        "takes over. Keep it above the longest board build; default 30",
        check=POSITIVE,
    )
    # What every server of one arena shares, so that any of them accepts a session another issued and hashes an
    # address alike. ARENA_SECRET is environment only: `ps` shows arguments. Neither: a key per process.
    secret: str = setting("", private=True)
    secret_file: str = setting(
        "",
        flag="--secret-file",
        help="a file holding the secret every server of this arena shares (at least 32 characters; or set "
        "ARENA_SECRET): sessions signed by one are accepted by the others, addresses hash alike. Needed "
        "with --database; default: a random key per process",
    )
    # The operator's views in the Leaderboard tab answer only a request that carries this key (docs/leaderboard.md).
    operator_key: str = setting("", private=True)  # environment only: `ps` shows arguments
    operator_key_file: str = setting(
        "",
        flag="--operator-key-file",
        help="a file holding the operator key (at least 16 characters; or set ARENA_OPERATOR_KEY): the "
        "Leaderboard tab's voter check and downloads of every conversation answer only requests that carry it; "
        "without a key they are not offered, whatever address the app listens on",
    )
    ui_export: str = setting(
        "auto",
        flag="--ui-export",
        choices=UI_EXPORT_MODES,
        help="the operator's views in the Leaderboard tab: auto (default) offers them when an operator key is "
        "set; on refuses to start without one; off never offers them",
    )
    # Deploy: login, rate limits, server limits, Hub sync (docs/deploy.md). No login is the local default.
    auth_file: str = setting(
        "",
        flag="--auth-file",
        help="require a login: a file of username:password lines (passwords can also come from ARENA_AUTH)",
    )
    auth: str = setting("", private=True)  # ARENA_AUTH=user:pw,user2:pw2 (environment only: `ps` shows arguments)
    hf_oauth: bool = setting(
        False, flag="--hf-oauth", help="require 'Sign in with Hugging Face' (on a Space with hf_oauth: true)"
    )
    # Sign-in through a trusted proxy (docs/deploy.md, "Sign-in through your company's proxy").
    auth_header: str = setting(
        "",
        flag="--auth-header",
        metavar="HEADER",
        check=check_header,
        help="sign-in through a proxy in front (oauth2-proxy and the like): the person's name comes from this "
        "header (e.g. X-Forwarded-User), believed only from --trusted-proxies addresses; any other request with "
        "it is refused, and so is a page request from the proxy without it",
    )
    auth_email_header: str = setting(
        "",
        flag="--auth-email-header",
        metavar="HEADER",
        check=check_header,
        help="with --auth-header: the person's email from this header (e.g. X-Forwarded-Email); --operators may "
        "name people by it",
    )
    operators: tuple[str, ...] = setting(
        (),
        flag="--operators",
        metavar="NAMES",
        check=check_names,
        help="with a sign-in: comma-separated user names (or emails) who see the operator's views (voter check, "
        "downloads) without an operator key",
    )
    rate_messages: int = setting(
        20,
        flag="--rate-messages",
        help="chat messages per client per minute; default 20 (0: off)",
        check=OFF_OR_MORE,
    )
    rate_votes: int = setting(
        30, flag="--rate-votes", help="votes per client per minute; default 30 (0: off)", check=OFF_OR_MORE
    )
    rate_votes_day: int = setting(
        200, flag="--rate-votes-day", help="votes per client per day; default 200 (0: off)", check=OFF_OR_MORE
    )
    queue_size: int = setting(
        0,
        flag="--queue-size",
        help="UI requests that may wait before new ones are refused; default 0 = sized to the models",
        check=OFF_OR_MORE,
    )
    max_request_mb: float = setting(
        2.0, flag="--max-request-mb", help="largest request body or upload in MB; default 2", check=POSITIVE
    )
    hub_dataset: str = setting(
        "",
        flag="--hub-dataset",
        help="also push the logs to this Hugging Face dataset repo (owner/name; needs HF_TOKEN and internet)",
    )
    hub_every_min: float = setting(
        10.0, flag="--hub-every", help="minutes between pushes to --hub-dataset; default 10", check=POSITIVE
    )
    # The arena's own board snapshots (webui/server/schedule.py): one server writes LOG_DIR/snapshots/board-<UTC
    # time>.json every period; each new one's changes go to the webhook.
    snapshot_every: str = setting(
        "",
        flag="--snapshot-every",
        metavar="DURATION",
        check=check_duration,
        help="take a board snapshot into LOG_DIR/snapshots every DURATION (30m, 6h, 24h, 1d), one server among "
        "several; with --hub-dataset the snapshots and exports go to the Hub too; default off",
    )
    notify_url: str = setting(
        "",
        flag="--notify-url",
        metavar="URL",
        check=check_webhook,
        private=True,  # a webhook's URL holds its secret
        help="POST each new snapshot's changes (rank moves, new models) to this webhook as Slack-compatible JSON "
        "(needs --snapshot-every); also ARENA_NOTIFY_URL, which keeps the URL out of `ps`",
    )
    # A browser session (Gradio's copy of the page, the tab's conversations) unused this long is removed, with its
    # binding to the browser's secret (docs/deploy.md); an open tab touches it every 2 s.
    session_idle_min: float = setting(
        30.0,
        flag="--session-idle-min",
        help="minutes after which an unused browser session is removed from memory; default 30",
        check=POSITIVE,
    )
    # A stop gives open connections this long to close before it cuts them off (webui/server/stopping.py): a
    # container manager kills a process that takes longer than its own grace (10 s for `docker stop`).
    shutdown_grace_s: float = setting(
        5.0,
        flag="--shutdown-grace-s",
        help="on Ctrl-C or SIGTERM, every reply is stopped at once (kept as stopped) and open connections (browser "
        "tabs, API streams) get this many seconds to close before they are cut off and the engines stop; default 5",
        check=Rule(lambda v: 0 <= v <= 3600, "0 to 3600 seconds (0: cut open connections off at once)"),
    )
