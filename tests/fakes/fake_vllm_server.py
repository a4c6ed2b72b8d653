"""A stand-in for `python -m vllm.entrypoints.openai.api_server` in process tests: it answers
/health on --port after --delay seconds, starts a worker child in its own process group (as vLLM
does), and exits with an error instead when --fail is given."""

import argparse
import http.server
import subprocess
import sys
import time
from pathlib import Path

parser = argparse.ArgumentParser()
parser.add_argument("--port", type=int, required=True)
parser.add_argument("--delay", type=float, default=0.0)
parser.add_argument("--fail", default="")
parser.add_argument("--shm", default="", help="leave this file in /dev/shm, as vLLM's engine does when killed")
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
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()

    def log_message(self, *a):
        pass


http.server.HTTPServer(("127.0.0.1", args.port), Health).serve_forever()
