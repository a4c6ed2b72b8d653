"""Votes and transcripts on disk: append-only JSON Lines in FastChat's arena-log format.

Files are `LOG_DIR/YYYY-MM-DD-conv.json` (UTC dates), one JSON object per line, so that FastChat's
`clean_battle_data` reads them unchanged; a server with a name (several sharing one vote index)
writes `YYYY-MM-DD-NAME-conv.json`, so that its files never share a name with another's. Our additions ride along as extra keys that FastChat
ignores; docs/logging.md lists them. Among them what the leaderboard would otherwise compute from a
battle vote's text every time it indexes it: the identity check and the word list's version
(`hygiene`), and the text's features (`features`, counted by a function the app passes in:
`VoteContext.features`, since this layer does not import the leaderboard).

Durability rules, and why:
- one record is one `write()` on an O_APPEND descriptor, under a thread lock (threads share the
  descriptor) and `fcntl.flock` (other processes have their own), so records never interleave;
- a failed write is cut back off the file, and a record that follows a torn line (a writer killed
  mid-record) starts on a fresh line, so one accident never corrupts the next record;
- votes are fsync'ed before `vote()` returns, because the UI tells the user "recorded";
- readers skip a last line without its newline (still being written, or torn).
"""

from __future__ import annotations

import collections
import contextlib
import datetime as dt
import errno
import fcntl
import json
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from webui.config import Settings
from webui.records.events import ChatEvent, Conversation, RecordError, VoteEvent
from webui.records.identity import leaked_identity, word_list_version
from webui.records.privacy import IdentityPolicy, address_secret, build_policy
from webui.types import PAIR_VOTES, SINGLE_VOTES

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1
FILE_SUFFIX = "-conv.json"
BATTLE_VOTES = tuple(vote.kind for vote in PAIR_VOTES)
DIRECT_VOTES = tuple(vote.kind for vote in SINGLE_VOTES)
VOTE_FAILED = "Your vote could not be recorded: the server cannot write its log right now. Please try again later."
CHAT_FAILED = "This conversation could not be logged: the server cannot write its log right now."
_REMEMBERED_CONVERSATIONS = 50_000  # reply ends kept in memory to stamp onto later votes
SESSION_PREFIX = "session:"  # hashed apart from addresses: a session key never equals an address's hash
PERSON_PREFIX = "person:"  # and a signed-in person's key never equals a session's or the logged user's hash


def session_key(session: str, policy: IdentityPolicy) -> str:
    """The key a vote record carries for the browser session that cast it: a keyed hash of the
    session's identity (today Gradio's session hash; soon a server-issued secret), so that the
    leaderboard can show a visitor their own votes while the log never holds the secret."""
    if not session or policy.mode != "hash":
        return ""
    return policy.apply(SESSION_PREFIX + session)


def person_key(user: str, policy: IdentityPolicy) -> str:
    """The key a signed-in person's votes carry in place of the session's: one keyed hash of their
    name, so that "my votes" finds them from any browser or device they sign in on."""
    if not user or policy.mode != "hash":
        return ""
    return policy.apply(PERSON_PREFIX + user)


def day_file(log_dir: Path, tstamp: float, server: str = "") -> Path:
    """The file a record stamped `tstamp` belongs in: its UTC date, named like FastChat's."""
    day = dt.datetime.fromtimestamp(tstamp, tz=dt.timezone.utc).strftime("%Y-%m-%d")
    return log_dir / day_file_name(day, server)


def day_file_name(day: str, server: str = "") -> str:
    """`YYYY-MM-DD-conv.json`, or with the writing server's name `YYYY-MM-DD-NAME-conv.json`."""
    return f"{day}-{server}{FILE_SUFFIX}" if server else f"{day}{FILE_SUFFIX}"


def encode(record: dict[str, Any]) -> bytes:
    """One line: ASCII JSON (so no character inside a string can look like a line break) + "\\n"."""
    return (json.dumps(record, default=str) + "\n").encode("ascii")


class AppendLog:
    """Appends whole lines to day files, safely across threads and processes."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._path: Path | None = None

    def append(self, path: Path, line: bytes, *, durable: bool) -> None:
        """Append `line` (ending in a newline) to `path`; with `durable`, fsync before returning."""
        with self._lock:
            fd = self._descriptor(path)
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                _append_locked(fd, line)
                if durable:
                    os.fsync(fd)
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)

    def close(self) -> None:
        with self._lock:
            self._close()

    def _descriptor(self, path: Path) -> int:
        """The open descriptor for `path`, reopened on a new day or if the file was moved away
        (a log rotated or deleted under us would otherwise swallow records silently)."""
        if self._fd is not None and self._path == path and _same_file(self._fd, path):
            return self._fd
        self._close()
        path.parent.mkdir(parents=True, exist_ok=True)
        existed = path.exists()
        self._fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o640)
        self._path = path
        if not existed:
            _fsync_dir(path.parent)  # the new name must survive a crash too, not only its data
        return self._fd

    def _close(self) -> None:
        if self._fd is not None:
            try:
                os.close(self._fd)
            finally:
                self._fd, self._path = None, None


def _append_locked(fd: int, line: bytes) -> None:
    start = os.fstat(fd).st_size
    if start and os.pread(fd, 1, start - 1) != b"\n":
        line = b"\n" + line  # the previous writer died mid-record: do not glue onto its torn line
    try:
        view = memoryview(line)
        while view:  # a regular file writes everything at once unless the disk fills up
            written = os.write(fd, view)
            view = view[written:]
    except OSError:
        _truncate_quietly(fd, start)
        raise


def _truncate_quietly(fd: int, size: int) -> None:
    with contextlib.suppress(OSError):  # not a regular file (/dev/full in a test), or the disk refuses even that
        os.ftruncate(fd, size)


def _same_file(fd: int, path: Path) -> bool:
    try:
        return os.stat(path).st_ino == os.fstat(fd).st_ino
    except OSError:
        return False


def _fsync_dir(folder: Path) -> None:
    try:
        dir_fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dir_fd)
    except OSError:
        pass
    finally:
        os.close(dir_fd)


# --- records ---------------------------------------------------------------------------------


def state_dict(conv: Conversation, finish_reasons: Sequence[str] = ()) -> dict[str, Any]:
    """FastChat's conversation state, plus the sampling parameters, each reply's finish reason and,
    where known, the fingerprint of what served it."""
    served = (
        {"fingerprint": conv.fingerprint, "fingerprint_components": dict(conv.fingerprint_components)}
        if conv.fingerprint
        else {}
    )
    return {
        "template_name": conv.template_name,
        "system_message": conv.system_message,
        "roles": ["user", "assistant"],
        "messages": [[role, text] for role, text in conv.messages],
        "offset": 0,
        "conv_id": conv.conv_id,
        "model_name": conv.model_name,
        "params": conv.params.as_dict(),
        "finish_reasons": list(finish_reasons),
        **served,
    }


@dataclass(frozen=True)
class ReplyEnd:
    """How one reply ended, as the votes on its conversation record it: the finish reason and the
    reply's speed (None where the engine did not measure it)."""

    reason: str
    ttft_s: float | None = None
    tokens_per_s: float | None = None


def vote_state(conv: Conversation, ends: Sequence[ReplyEnd]) -> dict[str, Any]:
    """A vote's state: `state_dict` plus each turn's time to first token and tokens/s, oldest first
    (as `finish_reasons`), so that the leaderboard can set speed beside quality, with transcripts
    off too (no chat records are written then)."""
    return {
        **state_dict(conv, [e.reason for e in ends]),
        "ttft_s": [e.ttft_s for e in ends],
        "tokens_per_s": [e.tokens_per_s for e in ends],
    }


def redact_state(state: dict[str, Any]) -> dict[str, Any]:
    """The state without the words: roles and turn structure stay, so the vote still counts."""
    return {**state, "messages": [[role, ""] for role, _ in state["messages"]], "redacted": True}


def chat_record(event: ChatEvent, policy: IdentityPolicy, tstamp: float) -> dict[str, Any]:
    conv, done = event.conversation, event.finished
    return {
        "tstamp": round(tstamp, 4),
        "type": "chat",
        "model": conv.model_name,
        "gen_params": conv.params.as_dict(),
        "start": round(event.start, 4),
        "finish": round(event.finish, 4),
        "state": state_dict(conv, (done.reason.value,)),
        "ip": policy.apply(event.client.address),
        "schema_version": SCHEMA_VERSION,
        "mode": conv.mode,
        "battle_id": conv.battle_id,
        "turn": conv.turn,
        "anonymous": conv.anonymous,
        "user": policy.apply(event.client.user),
        **done.stats(),
        "error": done.error,
    }


# A battle vote record (all but "features") -> what its "features" key holds, or None for none.
VoteFeatures = Callable[[dict[str, Any]], dict[str, Any] | None]


@dataclass
class VoteContext:
    """What a vote record needs beyond the event: how its replies ended, identity words, redaction,
    and the function that counts a battle vote's features from its record as written (none: the
    record has no "features" key, and the leaderboard counts them when it reads the vote)."""

    reply_ends: Callable[[Conversation], Sequence[ReplyEnd]]
    identity_words: Sequence[str] = ()
    redact: bool = False
    vote_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    features: VoteFeatures | None = None


def vote_record(event: VoteEvent, policy: IdentityPolicy, tstamp: float, ctx: VoteContext) -> dict[str, Any]:
    """A FastChat vote line: battle votes carry `models` and `states`, direct votes `model`/`state`;
    `hygiene` the identity check of the replies (before any redaction) and the version of the word
    list it used; a battle vote `features`, where `ctx` counts them."""
    convs = list(event.conversations)
    _check_vote_shape(event.kind, convs)
    states = [vote_state(c, ctx.reply_ends(c)) for c in convs]
    replies = [text for s in states for role, text in s["messages"] if role == "assistant"]
    hygiene = {
        "identity_leak": leaked_identity(replies, ctx.identity_words),
        "identity_words": word_list_version(ctx.identity_words),
    }
    if ctx.redact:
        states = [redact_state(s) for s in states]
    record: dict[str, Any] = {"tstamp": round(tstamp, 4), "type": event.kind}
    if event.kind in BATTLE_VOTES:
        anonymous = convs[0].anonymous
        record["models"] = ["", ""] if anonymous else [c.model_name for c in convs]
        record["states"] = states
    else:
        record["model"] = convs[0].model_name
        record["state"] = states[0]
    record.update(
        {
            "ip": policy.apply(event.client.address),
            "schema_version": SCHEMA_VERSION,
            "vote_id": ctx.vote_id,
            "mode": convs[0].mode,
            "battle_id": convs[0].battle_id,
            "turn": convs[0].turn,
            "anonymous": convs[0].anonymous,
            "user": policy.apply(event.client.user),
            "hygiene": hygiene,
            "extra": dict(event.extra),
        }
    )
    if ctx.features is not None and event.kind in BATTLE_VOTES:
        found = ctx.features(record)
        if found is not None:
            record["features"] = found
    return record


def _check_vote_shape(kind: str, convs: list[Conversation]) -> None:
    if kind in BATTLE_VOTES and len(convs) != 2:
        raise ValueError(f"{kind}: a battle vote needs two conversations, got {len(convs)}")
    if kind in DIRECT_VOTES and len(convs) != 1:
        raise ValueError(f"{kind}: a direct vote needs one conversation, got {len(convs)}")
    if kind not in BATTLE_VOTES + DIRECT_VOTES:
        raise ValueError(f"unknown vote kind {kind!r}")
    if len(convs) == 2 and convs[0].anonymous != convs[1].anonymous:
        raise ValueError("both sides of a battle must be anonymous, or neither")


# --- the recorder ----------------------------------------------------------------------------


class JsonlRecorder:
    """The `webui.records.events.Recorder` that writes FastChat-compatible JSON Lines.

    Never raises anything but RecordError for disk trouble, and only after logging the cause, so
    the UI can show the message and keep serving.
    """

    def __init__(
        self,
        log_dir: Path,
        policy: IdentityPolicy,
        *,
        log_transcripts: bool = True,
        identity_words: Sequence[str] = (),
        clock: Callable[[], float] = time.time,
        writer: AppendLog | None = None,
        session_policy: IdentityPolicy | None = None,
        server_name: str = "",
        features: VoteFeatures | None = None,
    ) -> None:
        self.log_dir = Path(log_dir)
        self.server_name = server_name
        self.policy = policy
        # Sessions are always hashed (never kept raw), with the address key; none keeps nothing.
        self.session_policy = session_policy or (policy if policy.mode == "hash" else IdentityPolicy("none"))
        self.log_transcripts = log_transcripts
        self.identity_words = tuple(identity_words)
        self.features = features
        self._clock = clock
        self._writer = writer or AppendLog()
        self._reasons: collections.OrderedDict[str, dict[int, ReplyEnd]] = collections.OrderedDict()
        self._reasons_lock = threading.Lock()
        # Called after each vote is durable (the leaderboard's index catches up): they must only
        # signal, never block, and what they raise is logged, not passed on: the vote is recorded.
        self.vote_listeners: list[Callable[[], None]] = []

    @classmethod
    def from_settings(
        cls, settings: Settings, model_names: Iterable[str] = (), features: VoteFeatures | None = None
    ) -> JsonlRecorder:
        from webui.records.identity import identity_words

        key = address_secret(settings)
        policy = build_policy(settings.ip_logging, Path(settings.log_dir), key)
        sessions = policy if settings.ip_logging != "raw" else build_policy("hash", Path(settings.log_dir), key)
        words = identity_words(model_names, settings.identity_words)
        return cls(
            Path(settings.log_dir),
            policy,
            log_transcripts=settings.log_transcripts,
            identity_words=words,
            session_policy=sessions,
            server_name=settings.server_name,
            features=features,
        )

    def chat(self, event: ChatEvent) -> None:
        """Log a finished or stopped reply (unless transcripts are off); remember how it ended so
        that a later vote on the conversation carries it."""
        done = event.finished
        self._remember(event.conversation, ReplyEnd(done.reason.value, done.ttft_s, done.tokens_per_s))
        if not self.log_transcripts:
            return
        tstamp = self._clock()
        self._write(chat_record(event, self.policy, tstamp), tstamp, durable=False, failure=CHAT_FAILED)

    def vote(self, event: VoteEvent) -> None:
        """Log a vote and fsync it: when this returns the vote survives a crash."""
        tstamp = self._clock()
        ctx = VoteContext(
            self._reply_ends, self.identity_words, redact=not self.log_transcripts, features=self.features
        )
        self._write(vote_record(event, self.policy, tstamp, ctx), tstamp, durable=True, failure=VOTE_FAILED)
        for listener in list(self.vote_listeners):
            try:
                listener()
            except Exception:  # see vote_listeners
                log.exception("a vote listener failed")

    def session_key(self, session: str, user: str | None = None) -> str:
        if user:
            return person_key(user, self.session_policy)
        return session_key(session, self.session_policy)

    def close(self) -> None:
        self._writer.close()

    def _write(self, record: dict[str, Any], tstamp: float, *, durable: bool, failure: str) -> None:
        path = day_file(self.log_dir, tstamp, self.server_name)
        try:
            self._writer.append(path, encode(record), durable=durable)
        except OSError as exc:
            reason = "the disk is full" if exc.errno in (errno.ENOSPC, errno.EDQUOT) else str(exc)
            log.error("could not write a %s record to %s: %s", record["type"], path, reason)
            raise RecordError(failure) from exc

    def _remember(self, conv: Conversation, end: ReplyEnd) -> None:
        """Keyed by turn: a regenerated reply replaces the attempt it redoes."""
        with self._reasons_lock:
            self._reasons.setdefault(conv.conv_id, {})[conv.turn] = end
            self._reasons.move_to_end(conv.conv_id)
            while len(self._reasons) > _REMEMBERED_CONVERSATIONS:
                self._reasons.popitem(last=False)

    def _reply_ends(self, conv: Conversation) -> list[ReplyEnd]:
        """How each turn up to the conversation's own ended, oldest first."""
        with self._reasons_lock:
            by_turn = dict(self._reasons.get(conv.conv_id, {}))
        return [end for turn, end in sorted(by_turn.items()) if turn <= conv.turn]


# --- reading ---------------------------------------------------------------------------------


@dataclass
class ReadReport:
    """What reading found: records, plus lines skipped and why (the caller may show it)."""

    records: list[dict[str, Any]] = field(default_factory=list)
    files: int = 0
    torn_last_lines: int = 0
    bad_lines: int = 0


def log_files(log_dir: Path) -> list[Path]:
    """Day files in date order (the names sort by date)."""
    folder = Path(log_dir)
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.name.endswith(FILE_SUFFIX) and p.is_file())


def read_logs(log_dir_or_files: Path | Iterable[Path]) -> ReadReport:
    """Every record in a log directory (or the given files), skipping lines that are not whole."""
    paths = log_files(log_dir_or_files) if isinstance(log_dir_or_files, (str, Path)) else list(log_dir_or_files)
    report = ReadReport()
    for path in paths:
        report.files += 1
        for status, record in iter_lines(Path(path).read_bytes()):
            if status == "ok" and record is not None:
                report.records.append(record)
            elif status == "torn":
                report.torn_last_lines += 1
            else:
                report.bad_lines += 1
    if report.torn_last_lines or report.bad_lines:
        log.warning("skipped %d torn and %d unreadable log lines", report.torn_last_lines, report.bad_lines)
    return report


def iter_lines(data: bytes) -> Iterator[tuple[str, dict[str, Any] | None]]:
    """("ok", record) per whole line; ("torn", None) for a last line without its newline;
    ("bad", None) for a line that is not a JSON object with a "type"."""
    lines = data.split(b"\n")
    tail = lines.pop()  # "" when the data ends with a newline
    for raw in lines:
        if not raw.strip():
            continue
        record = _parse(raw)
        yield ("ok", record) if record is not None else ("bad", None)
    if tail.strip():
        yield "torn", None


def _parse(raw: bytes) -> dict[str, Any] | None:
    try:
        record = json.loads(raw)
    except (ValueError, RecursionError):  # (nested deeper than json can go: unreadable, as torn)
        return None
    return record if isinstance(record, dict) and isinstance(record.get("type"), str) else None
