"""A loopback HTTP server speaking OpenAI's chat completions wire format.

The real `openai` client talks to it over TCP, so its retries, headers and parsing are the ones
production runs. Each request is recorded; responses are played from a script, then `default`.
"""

import email.parser
import json
import random
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
        # A server whose answer depends on what it is asked: a function of the request body giving
        # a ScriptedResponse, or None to fall through to `default`. The script still comes first.
        self.responder = None
        self.requests = []
        # The client ends of the TCP connections requests came on: a client that keeps its
        # connections open shows few, whatever the number of requests.
        self.connections = set()
        # Fault injection: every answer waits `latency` seconds, and a `failure_rate` share of
        # requests (drawn from a seeded generator) get a 429 or a 500 instead of their answer.
        self.latency = 0.0
        self.failure_rate = 0.0
        self._random = random.Random(0)
        # Bodies of the requests answered 200, in order: a body twice is a call paid twice.
        self.answered = []
        # Bodies of requests whose client was gone by the time the answer was sent: paid, unread.
        self.unread = []
        # A server that honours idempotency keys (as Stripe's and some gateways do; OpenAI documents
        # none) answers a request repeating an answered Idempotency-Key from its record, unpaid:
        # the answers it charged for are those recorded here, one per key.
        self.honour_idempotency_keys = False
        self.answers_by_idempotency_key = {}
        self.replayed = []
        self._script = []
        # The Batch API (files + batches): a batch answers its lines from the same script, so a
        # test scripts batch answers exactly as it scripts direct calls.
        self.files = {}
        self.batches = {}
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
            if self.failure_rate and self._random.random() < self.failure_rate:
                return rate_limited() if self._random.random() < 0.5 else server_error()
        answer = self.responder(request.body) if self.responder is not None else None
        if answer is not None:
            return answer
        if self.default is not None:
            return self.default
        # A test that runs out of script fails loudly rather than having the client retry.
        return ScriptedResponse(
            599, {"error": {"message": "The fake OpenAI server has no response scripted.",
                            "type": "test", "param": None, "code": None}},
            {"x-should-retry": "false"},
        )

    # --- Batch API ------------------------------------------------------------------------------

    def _create_file(self, content_type, raw):
        message = email.parser.BytesParser().parsebytes(
            f"Content-Type: {content_type}\r\n\r\n".encode() + raw
        )
        fields = {
            part.get_param("name", header="content-disposition"): part.get_payload(decode=True)
            for part in message.get_payload()
        }
        with self._lock:
            file_id = f"file-{len(self.files) + 1}"
            self.files[file_id] = fields["file"]
        return ScriptedResponse(200, _file_object(file_id, len(fields["file"]),
                                                  fields.get("purpose", b"batch").decode()))

    def _create_batch(self, body):
        raw_lines = self.files[body["input_file_id"]].splitlines()
        lines = [json.loads(line) for line in raw_lines if line]
        output = []
        for line in lines:
            request = RecordedRequest(line["url"], {"x-batch": "1"}, line["body"])
            answer = self._next_response(request)
            output.append({
                "id": f"batch_req_{len(output)}",
                "custom_id": line["custom_id"],
                "response": {"status_code": answer.status, "request_id": "req",
                             "body": answer.body},
                "error": None,
            })
        with self._lock:
            batch_id = f"batch_{len(self.batches) + 1}"
            output_id = f"file-out-{batch_id}"
            self.files[output_id] = "".join(json.dumps(row) + "\n" for row in output).encode()
            # Reported once as in progress, so the client's polling is exercised.
            self.batches[batch_id] = {"polls": 0, "output_file_id": output_id, "total": len(lines),
                                      "input_file_id": body["input_file_id"]}
        return ScriptedResponse(200, self._batch_object(batch_id))

    def _batch_object(self, batch_id):
        batch = self.batches[batch_id]
        done = batch["polls"] > 0
        return {
            "id": batch_id, "object": "batch", "endpoint": "/v1/chat/completions",
            "input_file_id": batch["input_file_id"], "completion_window": "24h",
            "status": "completed" if done else "in_progress",
            "output_file_id": batch["output_file_id"] if done else None, "error_file_id": None,
            "created_at": int(time.time()),
            "request_counts": {"total": batch["total"], "completed": batch["total"] if done else 0,
                               "failed": 0},
        }

    def _get(self, path):
        parts = path.strip("/").split("/")
        with self._lock:
            if parts[:2] == ["v1", "batches"] and len(parts) == 3 and parts[2] in self.batches:
                response = ScriptedResponse(200, self._batch_object(parts[2]))
                self.batches[parts[2]]["polls"] += 1
                return response
            if (parts[:2] == ["v1", "files"] and len(parts) == 4 and parts[3] == "content"
                    and parts[2] in self.files):
                return ScriptedResponse(200, self.files[parts[2]])
        return _not_found(path)

    def start(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            # Keep-alive, as OpenAI's servers do: a client keeps its connections between calls.
            # Headers and body go out as two writes; without TCP_NODELAY the second waits for the
            # client's delayed ACK (40 ms) on a connection that stays open.
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def do_POST(self):
                fake.connections.add(self.client_address)
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {"unparsable": raw.decode("utf-8", "replace")}
                headers = {name.lower(): value for name, value in self.headers.items()}
                if self.path == "/v1/files":
                    self._send(fake._create_file(headers.get("content-type", ""), raw))
                    return
                if self.path == "/v1/batches":
                    self._send(fake._create_batch(body))
                    return
                if self.path != "/v1/chat/completions":
                    self._send(_not_found(self.path))
                    return
                request = RecordedRequest(self.path, headers, body)
                key = headers.get("idempotency-key")
                with fake._lock:
                    replay = fake.answers_by_idempotency_key.get(key) if fake.honour_idempotency_keys else None
                    if replay is not None:
                        fake.replayed.append(body)
                if replay is not None:
                    self._send(replay)
                    return
                response = fake._next_response(request)
                if key and response.status == 200:
                    with fake._lock:
                        fake.answers_by_idempotency_key[key] = response
                if fake.latency:
                    time.sleep(fake.latency)
                try:
                    self._send(response)
                except (BrokenPipeError, ConnectionResetError):
                    # The client died waiting (a killed worker): OpenAI bills the answer all the same.
                    with fake._lock:
                        fake.unread.append(body)
                    self.close_connection = True
                    return
                if response.status == 200:
                    with fake._lock:
                        fake.answered.append(body)

            def do_GET(self):
                self._send(fake._get(self.path))

            def _send(self, response):
                if isinstance(response.body, bytes):
                    payload, content_type = response.body, "application/octet-stream"
                else:
                    payload = json.dumps(response.body).encode("utf-8")
                    content_type = "application/json"
                self.send_response(response.status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(payload)))
                for name, value in response.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format, *args):
                pass

        class Server(ThreadingHTTPServer):
            # socketserver's listen backlog is 5: a client opening 16 connections at once had some
            # of them dropped and retried a second later, a stall OpenAI's servers do not have.
            request_queue_size = 128

        self._server = Server(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True,
                                        name="fake-openai")
        self._thread.start()
        return self

    def stop(self):
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def _not_found(path):
    return ScriptedResponse(404, {"error": {"message": f"No route {path}",
                                            "type": "invalid_request_error",
                                            "param": None, "code": None}})


def _file_object(file_id, size, purpose):
    return {"id": file_id, "object": "file", "bytes": size, "created_at": int(time.time()),
            "filename": f"{file_id}.jsonl", "purpose": purpose, "status": "processed"}
