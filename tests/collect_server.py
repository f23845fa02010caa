"""A loopback server that speaks Ollama's API (and the OpenAI chat API), for the collector's tests.

``FakeOllama`` is a ``http.server`` in a thread answering ``/api/tags``, ``/api/chat``,
``/api/generate`` (and the OpenAI ``/v1/models``, ``/v1/chat/completions``) with injected
latency and failures. Models answer arithmetic and multiple-choice questions: ``good:7b``
always right, ``bad:1b`` always wrong, so grading is checkable. It counts the generation
requests in flight, and with ``token_s`` set it decodes like a batching server: each output
token takes ``token_s(requests in flight now)`` seconds, so concurrency shows in the timings.
Used by ``test_collect_runner.py``, ``test_collect_sweep.py`` and ``test_bad_inputs.py``.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parents[1]

from routing_gym.collect.records import read_records

DIGESTS = {"good:7b": "a" * 64, "bad:1b": "b" * 64}


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request, client_address) -> None:
        # a client that hangs up mid-answer (an interrupted or timed-out collector) is a case under test
        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            super().handle_error(request, client_address)


class FakeOllama:
    """Loopback Ollama. ``plan`` is a queue of actions for the next generation requests:
    ``500``, ``404``, ``"malformed"``, ``"incomplete"``, ``"drop"`` (close without answering),
    ``("sleep", s)``; ``None`` answers normally."""

    def __init__(self, models: dict[str, str] | None = None, latency_s: float = 0.0, port: int = 0):
        self.models = dict(DIGESTS if models is None else models)
        self.latency_s = latency_s
        self.plan: list = []
        self.requests: list[dict] = []
        self.after_call = None  # hook(n) after answering generation request n
        self.before_call = None  # hook(n) when generation request n arrives
        self.n_generations = 0
        self.in_flight = 0  # generation requests being answered now
        self.arrivals: list[int] = []  # requests in flight just after each generation request arrived
        self.token_s: Callable[[int], float] | None = None  # seconds per output token given the requests in flight
        self._lock = threading.Lock()
        self._connections: set = set()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # keep pytest output clean
                pass

            def setup(self):
                super().setup()
                with fake._lock:
                    fake._connections.add(self.connection)

            def _send(self, status: int, body: bytes | dict, content_type="application/json"):
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                if self.path == "/api/tags":
                    self._send(200, {"models": [
                        {"name": m, "model": m, "modified_at": "2025-01-01T00:00:00Z", "size": 4_000_000_000,
                         "digest": d, "details": {"format": "gguf", "family": "llama", "parameter_size": m.split(":")[1].upper(),
                                                  "quantization_level": "Q4_K_M"}}
                        for m, d in fake.models.items()]})
                elif self.path == "/v1/models":
                    self._send(200, {"object": "list", "data": [{"id": m, "object": "model"} for m in fake.models]})
                else:
                    self._send(404, {"error": "no such endpoint"})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                openai = self.path == "/v1/chat/completions"
                if self.path not in ("/api/chat", "/api/generate") and not openai:
                    return self._send(404, {"error": "no such endpoint"})
                model = body.get("model")
                with fake._lock:
                    fake.requests.append({"path": self.path, **body})
                if model not in fake.models:
                    return self._send(404, {"error": f"model \"{model}\" not found, try pulling it first"})
                if self.path == "/api/generate" and not body.get("prompt"):  # load request
                    return self._send(200, {"model": model, "created_at": "now", "response": "", "done": True, "done_reason": "load"})
                with fake._lock:
                    action = fake.plan.pop(0) if fake.plan else None
                    fake.n_generations += 1
                    n = fake.n_generations
                    fake.in_flight += 1
                    fake.arrivals.append(fake.in_flight)
                try:
                    reply = self._generation(body, model, openai, action, n)
                finally:  # counted out before the answer leaves, so a client's next request never sees it
                    with fake._lock:
                        fake.in_flight -= 1
                if reply is None:  # "drop": close without answering
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                self._send(*reply)
                if fake.after_call is not None:
                    fake.after_call(n)

            def _generation(self, body: dict, model: str, openai: bool, action, n: int) -> tuple[int, bytes | dict] | None:
                if fake.before_call is not None:
                    fake.before_call(n)
                time.sleep(fake.latency_s)
                if action == "drop":
                    return None
                if isinstance(action, tuple) and action[0] == "sleep":
                    time.sleep(action[1])
                elif action in (500, 503):
                    return action, {"error": "CUDA error: out of memory"}
                elif action == 404:
                    return 404, {"error": f"model \"{model}\" not found, try pulling it first"}
                elif action == "malformed":
                    return 200, b"{\"model\": \"x\", \"message\": {\"role\": "
                if openai:
                    prompt = body["messages"][-1]["content"]
                else:
                    prompt = body["messages"][-1]["content"] if self.path == "/api/chat" else body["prompt"]
                text = answer(model, prompt)
                n_out = len(text.split())
                decode_ns = 200_000_000
                if fake.token_s is not None:  # decode token by token at the speed of the batch in flight
                    started = time.perf_counter()
                    for _ in range(n_out):
                        time.sleep(fake.token_s(fake.in_flight))
                    decode_ns = int((time.perf_counter() - started) * 1e9)
                if openai:
                    return 200, {"id": "x", "object": "chat.completion", "model": model,
                                 "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                                 "usage": {"prompt_tokens": len(prompt.split()), "completion_tokens": n_out}}
                payload = {"model": model, "created_at": "2025-01-01T00:00:00Z", "done": action != "incomplete",
                           "done_reason": "stop", "total_duration": decode_ns + 50_000_000, "load_duration": 1_000_000,
                           "prompt_eval_count": len(prompt.split()), "prompt_eval_duration": 20_000_000,
                           "eval_count": n_out, "eval_duration": decode_ns}
                if self.path == "/api/chat":
                    payload["message"] = {"role": "assistant", "content": text}
                else:
                    payload["response"] = text
                return 200, payload

        self.server = _QuietServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Die like a killed server: stop listening and cut the open keep-alive connections."""
        self.server.shutdown()
        self.server.server_close()
        with self._lock:
            for conn in self._connections:
                try:
                    conn.shutdown(2)
                except OSError:
                    pass


def answer(model: str, prompt: str) -> str:
    good = model.startswith("good")
    m = re.search(r"What is (\d+) \+ (\d+)\?", prompt)
    if m:
        value = int(m.group(1)) + int(m.group(2))
        return f"Adding the numbers gives {value if good else value + 1}. The answer is {value if good else value + 1}."
    m = re.search(r"fruit", prompt)
    if m:
        return "The answer is B." if good else "The answer is C."
    if "long" in prompt:
        return "word " * 400  # ~2 KB answers, to fill a small disk
    return "ready"


def write_questions(folder: Path) -> dict[str, Path]:
    arith = folder / "arith.jsonl"
    arith.write_text("".join(
        json.dumps({"query_id": f"arith-{i}", "prompt": f"What is {i} + {2 * i + 3}?", "reference": str(3 * i + 3)}) + "\n"
        for i in range(6)
    ))
    mc = folder / "mc.jsonl"
    mc.write_text("".join(
        json.dumps({"query_id": f"mc-{i}", "prompt": f"Question {i}: which is a fruit? A) car B) apple C) rock D) shoe",
                    "reference": "B", "metadata": {"n_options": 4}}) + "\n"
        for i in range(4)
    ))
    return {"arith": arith, "mc": mc}


def make_config(folder: Path, host: str, models=("good:7b", "bad:1b"), **overrides) -> dict:
    files = write_questions(folder)
    data = {
        "name": "loopback",
        "seed": 3,
        "benchmarks": [
            {"name": "arith", "path": str(files["arith"]), "grader": "gsm8k"},
            {"name": "mc", "path": str(files["mc"]), "grader": "mmlu"},
        ],
        "models": [{"id": m.split(":")[0], "name": m, "family": "fake", "params_b": 7.0 if m.startswith("good") else 1.0} for m in models],
        "server": {"ollama_host": host, "timeout_s": 5.0},
        "generation": {"num_predict": 64, "num_ctx": 2048, "seed": 11, "keep_alive": "5m"},
        "energy": {"meter": "replay", "idle_window_s": 1.0},
        "retry": {"max_attempts": 4, "backoff_s": 0.01, "backoff_max_s": 0.05, "stop_after_failed_pairs": 2},
    }
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict):
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    return data



def calls_of(out: Path, status: str | None = "ok", kind: str = "call", log: str = "records.jsonl") -> list[dict]:
    """The ``kind`` records of a run folder's log (``status`` None: every status)."""
    return [r for r in read_records(out / log).records if r.get("type") == kind and (status is None or r["status"] == status)]


def kill_9_when(args: list[str], ready: Callable[[], bool], timeout_s: float = 60.0) -> list[str]:
    """Run ``python -m routing_gym ARGS`` from the repository and ``kill -9`` it as soon as
    ``ready()`` (or after ``timeout_s``); returns the command, to run it again."""
    cmd = [sys.executable, "-m", "routing_gym", *args]
    proc = subprocess.Popen(cmd, cwd=REPO, env=_child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not ready():
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL
    return cmd


def rerun(cmd: list[str], timeout_s: float = 120.0) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=REPO, env=_child_env(), capture_output=True, text=True, timeout=timeout_s)


def _child_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
