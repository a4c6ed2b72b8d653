"""The settings table, second part: clients' addresses, what the logs keep, and how the leaderboard
counts votes (docs/logging.md, docs/leaderboard.md). Rows are in the order --help lists them."""

from __future__ import annotations

from dataclasses import dataclass

from webui.config.option import setting
from webui.config.values import IP_LOGGING_MODES, OFF_OR_MORE, Rule, check_trusted, parse_trusted_proxies


@dataclass(frozen=True)
class LeaderboardSettings:
    """A part of `Settings` (webui/config/settings.py), never made on its own."""

    # A count, or a tuple of addresses and networks: only a peer among them is believed, which header
    # sign-in needs.
    trusted_proxies: int | tuple[str, ...] = setting(
        0,
        flag="--trusted-proxies",
        metavar="N|ADDRESSES",
        read=parse_trusted_proxies,
        check=check_trusted,
        help="the reverse proxies in front of the app: how many (1 on Hugging Face Spaces; the client address is "
        "read from X-Forwarded-For only that far) or their comma-separated addresses and networks "
        "(127.0.0.1,10.0.0.0/8: only requests from them are believed; --auth-header needs this); default 0",
    )
    ip_logging: str = setting(
        "hash",
        flag="--ip-logging",
        choices=IP_LOGGING_MODES,
        help="how client addresses are kept in the logs: a keyed hash (default), raw, or none",
    )
    ip_hash_secret: str = setting("", private=True)  # empty: generated once, kept beside the logs
    log_transcripts: bool = setting(
        True,
        flag="--no-transcripts",
        help="do not log chat transcripts (votes are still recorded, with the conversations they judge)",
    )
    leaderboard_rounds: int = setting(
        200,
        flag="--leaderboard-rounds",
        help="bootstrap rounds for the leaderboard's 95%% intervals; default 200 (0: none)",
        check=OFF_OR_MORE,
    )
    leaderboard_include_named: bool = setting(
        False,
        flag="--leaderboard-include-named",
        help="also count side-by-side votes where the model names were visible",
    )
    leaderboard_drop_stopped: bool = setting(
        True, flag="--keep-stopped", help="keep battles in which a reply was stopped early"
    )
    # fewer battles: the model is preliminary (no rank, a likelihood-ratio interval)
    leaderboard_min_battles: int = setting(
        50,
        flag="--leaderboard-min-battles",
        help="models with fewer battles are shown as preliminary, without a rank; default 50 (0: none)",
        check=OFF_OR_MORE,
    )
    leaderboard_votes_per_day: int = setting(  # per UTC day
        0,
        flag="--leaderboard-votes-per-day",
        help="count at most this many votes per voter per day on the leaderboard; default 0 (no cap)",
        check=OFF_OR_MORE,
    )
    leaderboard_exclude_flagged: bool = setting(
        False,
        flag="--leaderboard-exclude-flagged",
        help="leave out the votes of voters whose votes disagree with everyone else's far beyond chance",
    )
    identity_words: str = setting(  # the model names are added
        "",
        flag="--identity-words",
        help="extra comma-separated words that disqualify a battle when a reply contains one",
    )
    # Names not merged get a row per fingerprint when what they serve changed (docs/leaderboard.md, "Fingerprints").
    leaderboard_merge_fingerprints: str = setting(
        "",
        flag="--merge-fingerprints",
        metavar="NAMES",
        help="comma-separated model names whose fingerprints (weights, engine, template) the leaderboard rates "
        "as one row; '*' for every model. Default: a row per fingerprint when a name's changed",
    )
    # docs/leaderboard.md, "The best of many"
    leaderboard_families: str = setting(
        "",
        flag="--leaderboard-families",
        metavar="PREFIXES",
        help="comma-separated name prefixes, each a family of variants (e.g. my-model-): the leaderboard says "
        "when its top row is the best of several, and how much of its lead that alone explains",
    )
    # Categories the operator declares (docs/leaderboard.md, "Categories you declare").
    categories_file: str = setting(
        "",
        flag="--categories-file",
        metavar="FILE",
        help="a YAML file of categories you declare (a name and a rule: keywords, a regular expression on the first "
        "prompt, a minimum length, a language); each becomes a board in the Leaderboard's Category menu "
        "(docs/leaderboard.md). A malformed file stops the start with its line and the reason",
    )
    category_prior_sd: float = setting(
        50.0,
        flag="--category-prior-sd",
        help="each category's board (built-in or declared) is shrunk toward the overall board by a normal prior of this standard "
        "deviation in Elo points, so that a small category does not swing wildly; default 50 (0: not shrunk)",
        check=Rule(lambda v: 0 <= v <= 1000, "0 (not shrunk) to 1000 Elo points"),
    )
    visitor_tags: bool = setting(
        False,
        flag="--visitor-tags",
        help="let visitors tag a battle with one of the declared categories before voting (needs --categories-file); "
        "the tag is kept in the vote record and counts for the category alongside its rule",
    )
