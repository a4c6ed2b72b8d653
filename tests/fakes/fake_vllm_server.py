"""A stand-in for `python -m vllm.entrypoints.openai.api_server` in process tests: it answers
/health on --port after --delay seconds, starts a worker child in its own process group (as vLLM
does), and exits with an error instead when --fail is given.

It also answers what the app asks of an engine server of its own (webui.engine.own_server): a
streamed `/v1/completions` whose prompt is a list of token ids. The reply is those ids, one per
chunk ("17 "), up to max_tokens, so a test reads back exactly what the engine received. As a remote
server (`backend: openai`) it lists --served-model-name at /v1/models and streams a chat reply that
repeats the last message's words.
"""

import argparse
import http.server
import json
import subprocess
import sys
import time
from pathlib import Path

parser = argparse.ArgumentParser()
parser.add_argument("--port", type=int, required=True)
parser.add_argument("--delay", type=float, default=0.0)
parser.add_argument("--fail", default="")
parser.add_argument("--shm", default="", help="leave this file in /dev/shm, as vLLM's engine does when killed")
parser.add_argument("--served-model-name", default="fake")
args, _ = parser.parse_known_args()
print("INFO 11-23 17:00:00 [api_server.py:1] starting the fake engine", flush=True)
if args.fail:
    print("Traceback (most recent call last):", flush=True)
    print('  File "engine.py", line 1, in <module>', flush=True)
    print(f"ValueError: {args.fail}", flush=True)
    sys.exit(1)
if args.shm:
    Path(f"/dev/shm/{args.shm}").write_bytes(b"x" * 4096)
worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
print(f"INFO worker pid {worker.pid}", flush=True)
time.sleep(args.delay)


class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path == "/v1/models":
            listed = {"object": "list", "data": [{"id": args.served_model_name, "object": "model"}]}
            self._send(200, [listed], stream=False)
            return
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        prompt, limit = body.get("prompt"), int(body.get("max_tokens") or 16)
        if self.path == "/v1/chat/completions" and body.get("stream"):
            words = str(body["messages"][-1]["content"]).split()[:limit]
            chunks = [{"choices": [{"index": 0, "delta": {"content": f"{w} "}, "finish_reason": None}]} for w in words]
            self._send(200, [*chunks, {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}])
            return
        if self.path != "/v1/completions" or not isinstance(prompt, list) or not body.get("stream"):
            self._send(400, [{"error": {"message": "not offered by the stand-in"}}], stream=False)
            return
        reply = prompt[:limit]
        finish = "length" if len(reply) < len(prompt) else "stop"
        chunks = [{"choices": [{"index": 0, "text": f"{token} ", "finish_reason": None}]} for token in reply]
        chunks.append({"choices": [{"index": 0, "text": "", "finish_reason": finish}]})
        chunks.append({"choices": [], "usage": {"prompt_tokens": len(prompt), "completion_tokens": len(reply)}})
        self._send(200, chunks)

    def _send(self, status, chunks, stream=True):
        self.send_response(status)
        self.send_header("Content-Type", "text/event-stream" if stream else "application/json")
        self.end_headers()
        if not stream:
            self.wfile.write(json.dumps(chunks[0]).encode())
            return
        for chunk in chunks:
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
        self.wfile.write(b"data: [DONE]\n\n")

    def log_message(self, *a):
        pass


http.server.ThreadingHTTPServer(("127.0.0.1", args.port), Health).serve_forever()
