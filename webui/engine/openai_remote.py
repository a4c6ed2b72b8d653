"""The engine for a model served by another OpenAI-compatible server (vLLM, TGI, llama.cpp, another
arena): its registration (`load_openai`, `default_concurrency`) and the checks made at load.

The arena fronts a fleet this way: each entry streams from the upstream into a pane or through our
own API, exactly like a local model (`remote_backend.RemoteBackend`, reading through
`upstream.Upstream`). Loading checks that the server answers and serves the model; an entry may list
several replicas (`base_url: [url, ...]`), and is ready when one of them answers (the others are
skipped until they answer a request). A failure here becomes the model's status.

Width: an entry without max_concurrency sends up to `--remote-concurrency` (16) requests at once to
each replica, which a batching server runs side by side.
"""

from __future__ import annotations

import logging
import os
from typing import Any

import httpx

from webui.config import Settings
from webui.engine.base import Slots, Weights
from webui.engine.remote_backend import RemoteBackend
from webui.engine.replicas import Replicas
from webui.engine.upstream import (
    KEY_REFUSED,
    NO_KEY,
    NOT_SERVED,
    TIMED_OUT,
    UNREACHABLE,
    Health,
    RemoteError,
    error_text,
)
from webui.models.entries import OpenAIEntry
from webui.models.fingerprint import remote_components
from webui.models.specs import ModelSpec

log = logging.getLogger(__name__)


def load_openai(spec: ModelSpec, settings: Settings) -> Any:
    """Registry loader: a client for the entry's server, after checking that the server answers
    and serves the model. A failure here becomes the model's status (failed: reason)."""

    client = _client(spec)
    replicas = Replicas(replica_urls(spec))
    try:
        listed = _probe_replicas(client, spec, replicas)
    except BaseException:
        client.close()
        raise
    health = Health(spec.name)
    log.info("%s: served by %s as %s", spec.name, ", ".join(replicas.urls), spec.remote_model)

    def make_backend(variant: ModelSpec, slots: Slots) -> RemoteBackend:
        return RemoteBackend(
            variant, client, slots, health, queue_timeout_s=settings.queue_timeout_s, replicas=replicas
        )

    # "remote" only: the device shows in every visitor's model status, the address is logged above
    identity = remote_components(replicas.urls[0], str(listed.get("id", spec.remote_model)))
    if isinstance(listed.get("root"), str) and listed["root"] != identity["model"]:
        identity["root"] = listed["root"]  # vLLM and others name the weights behind the id
    return _ReplicatedWeights(
        replicas,
        make_backend,
        device="remote",
        close=client.close,
        identity=identity,
        concurrency=default_concurrency(settings) * len(replicas.urls),  # each replica batches its own
    )


def default_concurrency(settings: Settings) -> int:
    """Requests in flight to one upstream server for an entry without max_concurrency (an entry
    with replicas gets this many per replica when it loads)."""
    return settings.remote_concurrency


class _ReplicatedWeights(Weights):
    """Weights whose status line counts the replicas being skipped ("1 of 3 replicas down"): the
    model still serves, so this is a remark beside "ready", not a problem; addresses go to the log."""

    def __init__(self, replicas: Replicas, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._replicas = replicas

    @property
    def engine(self) -> str:
        down = len(self._replicas.down())
        remark = f"{down} of {len(self._replicas.urls)} replicas down" if down else ""
        return "; ".join(part for part in (self._engine, remark) if part)

    @engine.setter
    def engine(self, value: str) -> None:
        self._engine = value


def _client(spec: ModelSpec) -> httpx.Client:
    headers = {}
    if spec.api_key_env:
        # The models file names the variable instead of holding the key, so the file can be shared.
        key = os.environ.get(spec.api_key_env)
        if not key:
            raise RemoteError(
                f"environment variable {spec.api_key_env} (the API key for {spec.base_url}) is not set", public=NO_KEY
            )
        headers["Authorization"] = f"Bearer {key}"
    timeout = httpx.Timeout(spec.timeout_s, connect=spec.connect_timeout_s)
    # No connection cap of httpx's own (100): the entry's generation slots already bound it.
    return httpx.Client(timeout=timeout, headers=headers, limits=httpx.Limits(max_connections=None))


def replica_urls(spec: ModelSpec) -> list[str]:
    """The entry's upstream URLs: `base_url` as one URL or a list of replicas."""
    entry = spec.entry
    given = entry.base_url if isinstance(entry, OpenAIEntry) else spec.base_url
    return [url.rstrip("/") for url in ([given] if isinstance(given, str) else given)]


def _probe_replicas(client: httpx.Client, spec: ModelSpec, replicas: Replicas) -> dict[str, Any]:
    """Ready when one replica answers and serves the model; the others are skipped until they
    answer a request (their reasons go to the log). None answering: the first one's failure. The
    model's entry in the first answering replica's model list ({} when it does not list them)."""
    failures: list[RemoteError] = []
    listed: dict[str, Any] | None = None
    for url in replicas.urls:
        try:
            entry = _probe(client, spec, url)
        except RemoteError as exc:
            failures.append(exc)
            replicas.failed(url)
            continue
        listed = entry if listed is None else listed
    if listed is None:
        raise failures[0]
    for failure in failures:
        log.warning("%s: a replica is not answering, the others serve: %s", spec.name, failure)
    return listed


def _probe(client: httpx.Client, spec: ModelSpec, base_url: str) -> dict[str, Any]:
    """Check that the server answers and serves the model; its entry in the server's model list
    ({} when it does not list its models)."""
    url = f"{base_url}/models"
    try:
        response = client.get(url, timeout=httpx.Timeout(spec.connect_timeout_s * 2, connect=spec.connect_timeout_s))
    except httpx.HTTPError as exc:
        public = TIMED_OUT if isinstance(exc, httpx.TimeoutException) else UNREACHABLE
        raise RemoteError(f"cannot reach {url}: {exc or type(exc).__name__}", public=public) from None
    if response.status_code in (401, 403):
        hint = f"check {spec.api_key_env}" if spec.api_key_env else "set api_key_env in the models file"
        raise RemoteError(f"{url} refused our key (HTTP {response.status_code}); {hint}", public=KEY_REFUSED)
    if response.status_code >= 400:
        raise RemoteError(f"{url} answered HTTP {response.status_code}: {error_text(response)}")
    try:
        listed = {m["id"]: m for m in response.json()["data"]}
    except (ValueError, KeyError, TypeError):
        log.warning("%s: %s did not list its models; assuming it serves %s", spec.name, url, spec.remote_model)
        return {}
    if spec.remote_model not in listed:
        served = ", ".join(map(str, listed)) or "nothing"
        raise RemoteError(f"{base_url} does not serve {spec.remote_model!r}; it serves: {served}", public=NOT_SERVED)
    entry = listed[spec.remote_model]
    return entry if isinstance(entry, dict) else {}
