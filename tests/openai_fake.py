"""A loopback HTTP server speaking OpenAI's chat completions wire format.

The real `openai` client talks to it over TCP, so its retries, headers and parsing are the ones
production runs. Each request is recorded; responses are played from a script, then `default`.
"""

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class ScriptedResponse:
    status: int
    body: dict
    headers: dict = field(default_factory=dict)


@dataclass
class RecordedRequest:
    path: str
    headers: dict
    body: dict


def completion(text, *, prompt_tokens=100, completion_tokens=50, model="gpt-4-0613"):
    """A successful chat completion, as OpenAI sends it."""
    return ScriptedResponse(200, {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": text, "refusal": None},
            "logprobs": None,
            "finish_reason": "stop",
        }],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
        "system_fingerprint": None,
    })


def _error(status, message, kind, code):
    # retry-after-ms is what OpenAI sends; honouring it keeps the client's retries fast here.
    return ScriptedResponse(
        status,
        {"error": {"message": message, "type": kind, "param": None, "code": code}},
        {"retry-after-ms": "10"},
    )


def rate_limited():
    return _error(429, "Rate limit reached for gpt-4.", "requests", "rate_limit_exceeded")


def server_error():
    return _error(500, "The server had an error while processing your request.", "server_error",
                  None)


class FakeOpenAI:
    def __init__(self, *, default=None):
        self.default = default
        self.requests = []
        self._script = []
        self._lock = threading.Lock()
        self._server = None
        self._thread = None

    @property
    def base_url(self):
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def script(self, *responses):
        with self._lock:
            self._script.extend(responses)

    def _next_response(self, request):
        with self._lock:
            self.requests.append(request)
            if self._script:
                return self._script.pop(0)
        if self.default is not None:
            return self.default
        # A test that runs out of script fails loudly rather than having the client retry.
        return ScriptedResponse(
            599, {"error": {"message": "The fake OpenAI server has no response scripted.",
                            "type": "test", "param": None, "code": None}},
            {"x-should-retry": "false"},
        )

    def start(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {"unparsable": raw.decode("utf-8", "replace")}
                if self.path != "/v1/chat/completions":
                    self._send(ScriptedResponse(404, {"error": {"message": f"No route {self.path}",
                                                                 "type": "invalid_request_error",
                                                                 "param": None, "code": None}}))
                    return
                headers = {name.lower(): value for name, value in self.headers.items()}
                request = RecordedRequest(self.path, headers, body)
                self._send(fake._next_response(request))

            def _send(self, response):
                payload = json.dumps(response.body).encode("utf-8")
                self.send_response(response.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for name, value in response.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format, *args):
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True,
                                        name="fake-openai")
        self._thread.start()
        return self

    def stop(self):
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
