"""What the arena relays when the models are elsewhere and fast: `python -m bench.tier.relay`.

    python -m bench.tier.relay --seconds 20 --streams 16 --tokens 512 [--paths api,ui]

A fake OpenAI-compatible upstream (`serve_upstream`, a process of its own: raw asyncio, every
reply's events encoded once and written in one go) streams as many tokens as asked at once, so
the arena is what limits the rate. The arena runs as users start it (`python -m webui`, one
`backend: openai` entry pointing at the upstream, no rate limits), alone and then two servers
behind nginx (deploy/nginx.conf.template through tests/proxy.py; API requests carry no cookie,
so nginx spreads them round-robin). Two paths, each measured on one server and on two:

- api: a client process of raw asyncio keeps `--streams` streaming chat completions open through
  `/v1/chat/completions` and adds up the tokens each one's usage chunk reports (the arena sends
  text that reached it together as one event: the events are counted too);
- ui: `--streams` visitors of the page in a client process, each sending one Direct chat message
  after another through the Gradio queue as a browser does (bench.serving.gradio_path, bench.serving.ui_client),
  tokens read from the UI's statistics line. Each has its own session cookie, so nginx spreads
  them by cookie as it spreads people (how many landed on each server is reported).

Reported per setup: tokens/s relayed in all, the arena servers' CPU seconds over the window (from
/proc, via psutil) and tokens per arena CPU-second ("per server core"), and the load average. On
a 2-core machine the upstream, nginx and the client share the cores with the servers: the ratio
of two servers to one is bounded by that, not by the arena (docs/performance.md says how much).
Figures, never asserts.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.report import ROOT, load_average
from webui.engine.process import free_port

SECRET = "bench-relay-secret-shared-by-both-servers"
CONTENT = b'"content":'  # one per text event the arena sends (and one in its first, role, event)
USAGE = re.compile(rb'"completion_tokens":\s*(\d+)')


# --- the upstream --------------------------------------------------------------------------


def _event(payload: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"


def reply_body(model: str, tokens: int) -> bytes:
    """An OpenAI streaming reply of `tokens` one-word chunks, usage and [DONE]."""
    base = {"id": "relay", "object": "chat.completion.chunk", "created": 0, "model": model}
    token = _event({**base, "choices": [{"index": 0, "delta": {"content": "tok "}, "finish_reason": None}]})
    end = _event({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]})
    usage = _event({**base, "choices": [], "usage": {"prompt_tokens": 8, "completion_tokens": tokens}})
    return token * tokens + end + usage + b"data: [DONE]\n\n"


PACE_EVERY_S = 0.05  # with --pace, a paced reply is written in slices this far apart


async def _write(writer: asyncio.StreamWriter, data: bytes, tokens: int, pace: float) -> None:
    """The reply at once, or (pace > 0) its token events at about `pace` tokens/s, as a model
    streams: the UI path's cost follows its updates, which a reply written at once collapses to one."""
    if pace <= 0:
        writer.write(data)
        return
    size = data.index(b"\n\n") + 2  # every token event has the first one's length
    step = max(1, round(pace * PACE_EVERY_S)) * size
    for start in range(0, tokens * size, step):
        writer.write(data[start : min(start + step, tokens * size)])
        await writer.drain()
        await asyncio.sleep(PACE_EVERY_S)
    writer.write(data[tokens * size :])


async def _answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, model: str, pace: float) -> None:
    replies: dict[int, bytes] = {}
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, path, _ = lines[0].split(" ", 2)
            headers = {
                k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:] if ":" in line)
            }
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            if method == "GET" and path.endswith("/models"):
                data = json.dumps({"object": "list", "data": [{"id": model, "object": "model"}]}).encode()
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n" % len(data)
                )
                writer.write(data)
            else:
                request = json.loads(body or b"{}")
                tokens = int(request.get("max_completion_tokens") or request.get("max_tokens") or 16)
                if tokens not in replies:
                    replies[tokens] = reply_body(model, tokens)
                data = replies[tokens]
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: %d\r\n\r\n" % len(data)
                )
                await _write(writer, data, tokens, pace)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


def serve_upstream(port: int, model: str, pace: float = 0.0) -> None:
    async def main() -> None:
        server = await asyncio.start_server(lambda r, w: _answer(r, w, model, pace), "127.0.0.1", port)
        async with server:
            await server.serve_forever()

    asyncio.run(main())


# --- the client ----------------------------------------------------------------------------


async def _stream(host: str, port: int, model: str, tokens: int) -> tuple[int, int]:
    """One streaming chat completion through the arena: the tokens its usage chunk counts, and the
    content events received (the arena sends text that arrived together as one event)."""
    body = json.dumps(
        {
            "model": model,
            "stream": True,
            "stream_options": {"include_usage": True},
            "max_tokens": tokens,
            "messages": [{"role": "user", "content": "go"}],
        }
    ).encode()
    reader, writer = await asyncio.open_connection(host, port)
    # HTTP/1.0: the reply ends with the connection, unchunked, so no chunk header splits the usage
    writer.write(
        b"POST /v1/chat/completions HTTP/1.0\r\nhost: %s\r\ncontent-type: application/json\r\n"
        b"content-length: %d\r\nconnection: close\r\n\r\n" % (host.encode(), len(body)) + body
    )
    await writer.drain()
    events, tail = 0, b""
    while chunk := await reader.read(65536):
        data = tail + chunk
        events += data.count(CONTENT) - tail.count(CONTENT)
        tail = data[-4096:]  # the usage chunk is near the end; a pattern split between reads is whole here
    writer.close()
    found = USAGE.findall(tail)
    return (int(found[-1]) if found else 0), events


async def _load(host: str, port: int, model: str, tokens: int, streams: int, seconds: float) -> dict[str, Any]:
    """`streams` clients, each streaming one completion after another, for `seconds`."""
    counted, events, failures, completions = [0], [0], [0], [0]
    deadline = time.monotonic() + seconds

    async def client() -> None:
        while time.monotonic() < deadline:
            try:
                got, sent = await _stream(host, port, model, tokens)
                counted[0] += got
                events[0] += sent
                completions[0] += 1
            except OSError:
                failures[0] += 1

    started = time.monotonic()
    await asyncio.gather(*(client() for _ in range(streams)))
    wall_s = time.monotonic() - started
    return {
        "tokens": counted[0],
        "events": events[0],
        "completions": completions[0],
        "wall_s": wall_s,
        "failures": failures[0],
    }


def client_main(args: list[str]) -> None:
    host, port, model, tokens, streams, seconds = args
    result = asyncio.run(_load(host, int(port), model, int(tokens), int(streams), float(seconds)))
    print(json.dumps(result))


def ui_load(url: str, model: str, tokens: int, streams: int, seconds: float) -> dict[str, Any]:
    """`streams` visitors of the page, each sending one Direct chat message after another for
    `seconds`, through the Gradio queue as a browser does (bench.serving.gradio_path). Each visitor has
    its own session cookie, so nginx spreads them over the servers as it spreads people; the
    servers they landed on are counted. Tokens are those the UI's statistics line reports."""
    import threading

    import httpx

    from bench.serving.gradio_path import DIRECT, GradioDriver
    from bench.serving.paths import Request

    request = Request(model, "go", tokens)
    drivers = [GradioDriver(url) for _ in range(streams)]
    landed: dict[str, int] = {}
    for driver in drivers:
        name = httpx.get(f"{url}/healthz", cookies=driver.client.http.cookies, timeout=10).json().get("server", "")
        landed[name] = landed.get(name, 0) + 1
    totals = {"tokens": 0, "events": 0, "completions": 0, "failures": 0}
    lock = threading.Lock()
    deadline = time.monotonic() + seconds

    def visitor(driver: GradioDriver) -> None:
        while time.monotonic() < deadline:
            try:
                _, (pane,) = driver.turn(DIRECT, [model], request)
                counts = {"tokens": pane.tokens or 0, "events": len(pane.chunk_times), "completions": 1}
            except Exception:  # a refused or broken turn is a figure, not a crash
                counts = {"failures": 1}
            with lock:
                for key, value in counts.items():
                    totals[key] += value

    started = time.monotonic()
    threads = [threading.Thread(target=visitor, args=(d,)) for d in drivers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall_s = time.monotonic() - started
    for driver in drivers:
        driver.client.close()
    return {**totals, "wall_s": wall_s, "visitors_per_server": landed}


def ui_client_main(args: list[str]) -> None:
    url, model, tokens, streams, seconds = args
    print(json.dumps(ui_load(url, model, int(tokens), int(streams), float(seconds))))


# --- the setups ----------------------------------------------------------------------------


@dataclass
class Arena:
    name: str
    port: int
    process: subprocess.Popen


def start_arena(name: str, folder: Path, models: Path) -> Arena:
    port = free_port()
    # one secret, as in a deployment: a page's cookie issued by one server is accepted by the other
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "GRADIO_ANALYTICS_ENABLED": "False", "ARENA_SECRET": SECRET}
    command = [sys.executable, "-m", "webui", "--port", str(port), "--models", str(models)]
    command += ["--log-dir", str(folder / name), "--cache-dir", str(folder / "cache"), "--server-name", name]
    command += ["--rate-messages", "0", "--trusted-proxies", "1"]
    with open(folder / f"{name}.out", "wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
    return Arena(name, port, process)


def _cpu_s(process: Any) -> float:
    """User and system CPU seconds of a process and its children (nginx's workers)."""
    return sum(sum(p.cpu_times()[:2]) for p in [process, *process.children(recursive=True)])


def measure(
    port: int, arenas: list[Arena], others: dict[str, int], args: argparse.Namespace, path: str = "api"
) -> dict[str, Any]:
    """One window of load through `port` on `path` (api: /v1 streams; ui: the page's queue): the
    arenas' CPU, and that of `others` (name: pid) and of the client, which share the machine's
    cores with them."""
    import resource

    import psutil

    processes = [psutil.Process(a.process.pid) for a in arenas]
    around = {name: psutil.Process(pid) for name, pid in others.items()}
    before = [sum(p.cpu_times()[:2]) for p in processes]
    others_before = {name: _cpu_s(p) for name, p in around.items()}
    client_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load = load_average()
    if path == "ui":
        client = ["--ui-client", f"http://127.0.0.1:{port}", "relay"]
    else:
        client = ["--client", "127.0.0.1", str(port), "relay"]
    done = subprocess.run(
        [sys.executable, "-m", "bench.tier.relay", *client, str(args.tokens), str(args.streams), str(args.seconds)],
        capture_output=True, text=True, check=True, cwd=ROOT,
    )  # fmt: skip
    result: dict[str, Any] = json.loads(done.stdout)
    cpu = [sum(p.cpu_times()[:2]) - b for p, b in zip(processes, before, strict=True)]
    client = resource.getrusage(resource.RUSAGE_CHILDREN)  # the client is the only child that ended
    result.update(
        client_cpu_s=round(client.ru_utime + client.ru_stime - client_before.ru_utime - client_before.ru_stime, 2),
        **{f"{name}_cpu_s": round(_cpu_s(p) - others_before[name], 2) for name, p in around.items()},
        tokens_per_s=result["tokens"] / result["wall_s"],
        arena_cpu_s=[round(c, 2) for c in cpu],
        tokens_per_arena_cpu_s=result["tokens"] / sum(cpu) if sum(cpu) else None,
        load_before=load,
        load_after=load_average(),
    )
    return result


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--upstream"]:
        serve_upstream(int(argv[1]), argv[2], float(argv[3]))
        return 0
    if argv[:1] == ["--client"]:
        client_main(argv[1:])
        return 0
    if argv[:1] == ["--ui-client"]:
        ui_client_main(argv[1:])
        return 0
    parser = argparse.ArgumentParser(prog="python -m bench.tier.relay", description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="each measurement's length; default 20")
    parser.add_argument("--streams", type=int, default=16, help="streams open at once; default 16")
    parser.add_argument("--tokens", type=int, default=512, help="tokens per completion; default 512")
    parser.add_argument(
        "--pace", type=float, default=0.0, help="tokens/s per stream the upstream sends (0, the default: all at once)"
    )
    parser.add_argument("--paths", default="api,ui", help="which paths to measure: api, ui or both; default api,ui")
    parser.add_argument("--out", type=Path, help="also write the figures here as JSON")
    args = parser.parse_args(argv)

    from tests.proxy import start_proxy
    from tests.servers import wait_models_ready

    folder = Path(tempfile.mkdtemp(prefix="bench-relay-"))
    upstream_port = free_port()
    upstream = subprocess.Popen(
        [sys.executable, "-m", "bench.tier.relay", "--upstream", str(upstream_port), "relay", str(args.pace)], cwd=ROOT
    )
    models = folder / "models.yaml"
    models.write_text(
        "models:\n  - name: relay\n    backend: openai\n"
        f"    base_url: http://127.0.0.1:{upstream_port}/v1\n    remote_model: relay\n"
        f"    max_concurrency: {args.streams * 2}\n    sampling: {{max_new_tokens: {args.tokens}}}\n"
    )
    arenas: list[Arena] = []
    proxy = None
    results: dict[str, Any] = {"settings": vars(args) | {"out": str(args.out)}, "cpus": os.cpu_count()}
    try:
        arenas = [start_arena(name, folder, models) for name in ("web1", "web2")]
        for arena in arenas:
            wait_models_ready(arena.name, arena.process, arena.port, folder / f"{arena.name}.out")
        proxy = start_proxy(folder / "nginx", [f"127.0.0.1:{a.port}" for a in arenas])
        others = {"upstream": upstream.pid, "nginx": proxy.process.pid}
        warm_up = argparse.Namespace(**{**vars(args), "seconds": 3})
        for path in args.paths.split(","):
            measure(arenas[0].port, arenas[:1], others, warm_up, path)
            one = measure(arenas[0].port, arenas[:1], others, args, path)
            two = measure(proxy.port, arenas, others, args, path)
            results[path] = {
                "one_server": one,
                "two_servers_nginx": two,
                "two_over_one": two["tokens_per_s"] / one["tokens_per_s"] if one["tokens_per_s"] else None,
            }
    finally:
        if proxy is not None:
            proxy.stop()
        for arena in arenas:
            arena.process.terminate()
            arena.process.wait(30)
        upstream.terminate()
        upstream.wait(30)
    text = json.dumps(results, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
