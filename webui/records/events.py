"""The seam between the UI/API and the log on disk.

The UI hands finished replies and votes to a `Recorder`; `webui.records.storage` provides the real one
(FastChat-compatible JSON Lines), `NullRecorder` records nothing. Records are described here, in
plain data, so that the UI never needs to know the file format.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from webui.types import Finished, SamplingParams

Mode = Literal["battle", "side_by_side", "direct"]


class RecordError(Exception):
    """A record could not be written (disk full, directory not writable). The message is safe to
    show to the user; the server log has the details."""


@dataclass(frozen=True)
class Conversation:
    """One pane's conversation after a reply finished (or was stopped)."""

    conv_id: str
    model_name: str
    template_name: str
    system_message: str
    messages: Sequence[tuple[str, str]]  # (role, text) with role "user" or "assistant"
    params: SamplingParams
    mode: Mode
    battle_id: str | None = None
    turn: int = 0
    anonymous: bool = False
    # What served the replies (webui.models.fingerprint): its id and the components hashed; "" for
    # a model whose weights cannot say what they are.
    fingerprint: str = ""
    fingerprint_components: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ChatEvent:
    conversation: Conversation
    finished: Finished
    start: float  # time.time() when the request began
    finish: float
    client: ClientInfo


@dataclass(frozen=True)
class VoteEvent:
    kind: str  # a kind of webui.types.VOTES
    conversations: Sequence[Conversation]  # one (direct) or two (left, right)
    client: ClientInfo
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ClientInfo:
    """Who sent it, as far as the server can tell. `address` is the real client address after the
    trusted-proxy rules; `user` the signed-in person (Gradio's login or the proxy's sign-in header),
    `email` theirs when the proxy sends one (never recorded: only `--operators` reads it); storage
    decides how (or whether) to keep the address and the user."""

    address: str | None = None
    user: str | None = None
    email: str | None = None


class Recorder(Protocol):
    def chat(self, event: ChatEvent) -> None:
        """Record a finished reply. May raise RecordError."""

    def vote(self, event: VoteEvent) -> None:
        """Record a vote durably (on disk, flushed) before returning. May raise RecordError."""

    def session_key(self, session: str, user: str | None = None) -> str:
        """What a vote record keeps of who cast it, so that "my votes" can find them: a keyed hash of
        the signed-in `user` when there is one (the same on every browser and device), else of the
        browser session (never the session's secret itself); "" when nothing is kept."""


class NullRecorder:
    """Records nothing; keeps what it was given so that tests can look."""

    def __init__(self) -> None:
        self.chats: list[ChatEvent] = []
        self.votes: list[VoteEvent] = []

    def chat(self, event: ChatEvent) -> None:
        self.chats.append(event)

    def vote(self, event: VoteEvent) -> None:
        self.votes.append(event)

    def session_key(self, session: str, user: str | None = None) -> str:
        return ""
