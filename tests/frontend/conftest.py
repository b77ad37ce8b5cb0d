"""The annotator pages in a browser: a page per test, and MTurk's externalSubmit on loopback."""

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs

import pytest


@pytest.fixture
def page(browser, live_server):
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.errors = []
    page.on("pageerror", lambda error: page.errors.append(str(error)))
    page.on("dialog", lambda dialog: page.errors.append(f"dialog: {dialog.message}") or dialog.dismiss())
    yield page
    context.close()


@pytest.fixture
def external_submit(settings):
    """MTurk's externalSubmit endpoint on loopback, recording what the worker's browser posts."""
    received = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", 0))).decode()
            received.append((self.path, {k: v[0] for k, v in parse_qs(body).items()}))
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(b"<!doctype html><title>MTurk</title><p>HIT submitted")

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    origin = f"http://127.0.0.1:{server.server_address[1]}"
    settings.MTURK_SUBMIT_ORIGINS = [origin]
    yield origin, received
    server.shutdown()
    server.server_close()
