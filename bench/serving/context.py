"""What the sections share: the models file of this run, the models loaded in this process (raw
and engine paths), and one real server (Gradio and API paths), each started on first use."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.serving import attach, models
from bench.serving.config import PATHS, BenchConfig
from bench.serving.gradio_path import GradioDriver, GradioUnavailable
from bench.serving.paths import Request, Sample, api_client, run_api, run_engine, run_raw
from bench.serving.server import ArenaProcess, Launch, http_get

log = logging.getLogger("bench")
Runner = Callable[[Request], Sample]


class PathUnavailable(RuntimeError):
    """This path cannot be measured here; the message says why (it goes into the results)."""


class BenchContext:
    def __init__(self, config: BenchConfig, workdir: Path) -> None:
        self.config = config
        self.workdir = workdir
        entries = models.select(
            models.with_device(models.read_entries(config.models_file), config.device), config.only_models
        )
        self.entries = entries
        # greedy defaults: what every path asks for explicitly, and what the page then shows
        self.models_file = models.write(
            models.greedy_defaults(entries, config.overhead_tokens), workdir / "models.yaml"
        )
        self.local_names = [e["name"] for e in models.local_entries(entries)]
        self._registry: Any = None
        self._server: ArenaProcess | None = None
        self._server_error: str | None = None
        self.launch: Launch | None = None
        self._gradio: GradioDriver | PathUnavailable | None = None
        self._api: Any = None
        self._warm: set[tuple[str, str]] = set()

    # ---- in this process -------------------------------------------------------------------
    def backend(self, name: str) -> Any:
        """The engine's backend for `name`, loaded through the app's own registry (so the raw path
        runs the very weights and prompt the engine uses). A model the app serves with vLLM is not
        loaded again: the backend asks the app's own vLLM server (bench.serving.attach)."""
        if self._registry is None:
            from webui.config import Settings
            from webui.engine.registry import build_registry

            # The ARENA_* variables as the app the bench starts reads them (e.g. ARENA_TRANSFORMERS_BATCHING)
            settings = Settings.from_env(models_file=self.models_file, log_dir=self.workdir / "logs", preload=False)
            self._registry = build_registry(settings, loaders=self._app_engines())
        return self._registry.load(name)

    def _app_engines(self) -> dict[str, Any] | None:
        """Loaders that attach to the app's vLLM servers; None (load here) when the app does not run."""
        try:
            server = self.server()
        except PathUnavailable:
            return None
        answer = http_get(server.url + "/healthz")
        health = json.loads(answer[1]).get("models", {}) if answer is not None and answer[0] == 200 else {}
        engines = {n: str(m.get("engine") or "") for n, m in health.items()}
        assert server.proc is not None, "a started server has a process"
        found = attach.vllm_servers(server.proc.pid)
        servers = {n: url for n, url in found.items() if engines.get(n, "").startswith("vLLM")}
        log.info("the engine-alone path asks the app's own vLLM servers: %s", servers or "none")
        return attach.loaders(servers, engines)

    def engine_name(self, name: str) -> str:
        """Which engine serves `name` in this process ("vLLM 0.32.0", or "transformers: why")."""
        self.backend(name)
        return self._registry.status(name).engine or "transformers"

    # ---- the real server -------------------------------------------------------------------
    def server(self) -> ArenaProcess:
        """The running server; PathUnavailable (with the server's own words) when it cannot start."""
        if self._server_error is not None:
            raise PathUnavailable(self._server_error)
        if self._server is None:
            server = ArenaProcess(self.models_file, self.workdir / "server")
            server.start()
            try:
                self.launch = server.wait(self.config.server_timeout_s)
            except Exception as exc:  # the in-process paths can still be measured
                server.stop()
                self._server_error = f"not available: the server did not start: {exc}"
                raise PathUnavailable(self._server_error) from exc
            self._server = server
            failed = {n: m["reason"] for n, m in self.launch.models.items() if m["state"] != "ready"}
            if failed:
                log.warning("models that failed to load in the server: %s", failed)
        return self._server

    def gradio(self) -> GradioDriver:
        if self._gradio is None:
            try:
                driver = GradioDriver(self.server().url)
                driver.endpoint("/direct_send")
                self._gradio = driver
            except PathUnavailable as exc:
                self._gradio = exc
            except GradioUnavailable as exc:
                self._gradio = PathUnavailable(f"not available: {exc}")
            except Exception as exc:  # no UI at all (e.g. not landed yet)
                self._gradio = PathUnavailable(f"not available: {type(exc).__name__}: {exc}")
        if isinstance(self._gradio, PathUnavailable):
            raise self._gradio
        return self._gradio

    def api(self) -> Any:
        if self._api is None:
            answer = http_get(self.server().url + "/v1/models")
            if answer is None or answer[0] != 200:
                raise PathUnavailable(f"not available: GET /v1/models answered {answer[0] if answer else 'nothing'}")
            self._api = api_client(self.server().url + "/v1")
        return self._api

    # ---- paths -----------------------------------------------------------------------------
    def runner(self, path: str) -> Runner:
        """A function running one request down `path`; raises PathUnavailable up front."""
        if path == "raw":
            return lambda r: run_raw(self.backend(r.model), r)
        if path == "engine":
            return lambda r: run_engine(self.backend(r.model), r)
        if path == "gradio":
            driver = self.gradio()
            return driver.sample
        if path == "api":
            client = self.api()
            return lambda r: run_api(client, r)
        raise ValueError(f"unknown path {path!r}; known: {', '.join(PATHS)}")

    def runners(self, paths: tuple[str, ...] = PATHS) -> tuple[dict[str, Runner], dict[str, str]]:
        """(path -> runner for those available, path -> why not for the others)."""
        found, missing = {}, {}
        for path in paths:
            try:
                found[path] = self.runner(path)
            except PathUnavailable as exc:
                missing[path] = str(exc)
        return found, missing

    def warm_up(self, path: str, runner: Runner, model: str) -> None:
        """One short request per path and model before measuring: first calls pay one-off costs
        (lazy initialisation, caches, connections) that are not what the section is about."""
        if (path, model) not in self._warm:
            runner(Request(model, self.config.prompt, 2))
            self._warm.add((path, model))

    def close(self) -> None:
        if self._server is not None:
            self._server.stop()
        if self._registry is not None:
            self._registry.close()
