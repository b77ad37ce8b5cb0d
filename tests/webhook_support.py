"""A webhook receiver on loopback (a real HTTP server in a thread that answers each POST with the
next of the statuses it was given, then 200, with a Location if given one, and keeps what it
received and when), and the sending of due deliveries here and now, as the delivery job does.

Loopback is refused to webhooks unless WEBHOOK_ALLOWED_NETWORKS names it: a test that sends to a
receiver here sets it to LOOPBACK."""

import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from webhooks.models import Delivery
from webhooks.sending import attempt

LOOPBACK = ["127.0.0.0/8"]


@dataclass
class Received:
    at: float
    headers: dict
    body: bytes


class Receiver:
    def __init__(self, statuses=(), location=None):
        self.statuses = list(statuses)
        self.location = location
        self.received = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with receiver._lock:
                    receiver.received.append(Received(time.monotonic(), dict(self.headers), body))
                    status = receiver.statuses.pop(0) if receiver.statuses else 200
                self.send_response(status)
                if receiver.location:
                    self.send_header("Location", receiver.location)
                self.send_header("Content-Type", "text/plain")
                self.end_headers()
                self.wfile.write(b"ok" if status < 300 else b"receiver is down")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/crowdbench"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def deliver_due():
    """One attempt of every pending delivery that is due; returns them, refreshed."""
    due = list(Delivery.objects.filter(status=Delivery.Status.PENDING).order_by("pk"))
    for delivery in due:
        attempt(delivery_id=delivery.pk)
    return [Delivery.objects.get(pk=delivery.pk) for delivery in due]
