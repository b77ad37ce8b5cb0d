"""MTurk at its wire: botocore's Stubber on the real client our code uses (which also runs every
request through mturk.model_check), a loopback MTurk endpoint for what the Stubber skips (botocore's
retries), and loopback HTTP servers answering as the CloudResearch Connect, Prolific and Toloka
APIs document."""

import json
import threading
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl

from botocore.stub import Stubber
from django.core.cache import cache

from mturk import client as mturk_client

SANDBOX = "https://mturk-requester-sandbox.us-east-1.amazonaws.com"


class MTurkWire:
    def __init__(self, settings, monkeypatch):
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
        settings.MTURK_SANDBOX = True
        settings.MTURK_ENDPOINT_URL = SANDBOX
        settings.PUBLIC_BASE_URL = "https://crowdbench.example.org"
        mturk_client._clients.clear()
        cache.clear()
        self.client = mturk_client.get_client()
        self.stubber = Stubber(self.client)
        self.calls = []
        self.client.meta.events.register("provide-client-params.mturk.*", self._record)

    def _record(self, params, model, **kwargs):
        self.calls.append((model.name, params))

    def __enter__(self):
        self.stubber.activate()
        return self

    def __exit__(self, *exc):
        self.stubber.deactivate()
        mturk_client._clients.clear()

    def expect(self, operation, response=None, params=None):
        self.stubber.add_response(operation, response or {}, params)

    def fail(self, operation, code, message="", status=400):
        self.stubber.add_client_error(operation, service_error_code=code, service_message=message,
                                      http_status_code=status)

    def done(self):
        self.stubber.assert_no_pending_responses()

    def operations(self):
        return [name for name, _ in self.calls]


class MTurkEndpoint:
    """MTurk's requester API on loopback as botocore speaks it (JSON 1.1 over POST, the operation
    named in X-Amz-Target). Each request takes the next scripted answer, so a test can throttle a
    call and count how often botocore sent it: unlike the Stubber, this runs botocore's retries."""

    def __init__(self, settings, monkeypatch):
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
        self.answers = []
        self.requests = []
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                operation = self.headers.get("X-Amz-Target", "").rsplit(".", 1)[-1]
                endpoint.requests.append((operation, json.loads(self.rfile.read(length) or b"{}")))
                status, body = endpoint.answers.pop(0)
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/x-amz-json-1.1")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        settings.MTURK_SANDBOX = True
        settings.MTURK_ENDPOINT_URL = f"http://127.0.0.1:{self.server.server_address[1]}"
        mturk_client._clients.clear()

    def answer(self, body):
        self.answers.append((200, body))

    def fail(self, code, message="", status=400):
        self.answers.append((status, {"__type": code, "Message": message}))

    def operations(self):
        return [operation for operation, _ in self.requests]

    def stop(self):
        self.server.shutdown()
        self.server.server_close()
        mturk_client._clients.clear()


def assignment(*, assignment_id, worker_id, hit_id, status="Submitted"):
    now = datetime.now(UTC)
    return {"AssignmentId": assignment_id, "WorkerId": worker_id, "HITId": hit_id,
            "AssignmentStatus": status, "AcceptTime": now - timedelta(minutes=3), "SubmitTime": now,
            "Answer": "<QuestionFormAnswers/>"}


class FakePlatform:
    """A loopback server; subclasses route (method, path) to handlers returning (status, body) or
    (status, body, headers)."""

    def __init__(self):
        self.requests = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}") if length else {}
                fake.requests.append((self.command, self.path, dict(self.headers), body))
                status, answer, *extra = fake.route(self.command, self.path, dict(self.headers), body)
                data = json.dumps(answer).encode()
                self.send_response(status)
                for name, value in (extra[0] if extra else {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PATCH = do_PUT = _serve

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/api/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


class FakeProlific(FakePlatform):
    """Prolific's documented behaviour: Token auth, paginated submissions, bulk approve, reject
    transition with a 100+ character message and a category, two-step bonuses whose pay step pays
    again every time it is called."""

    def __init__(self, token="prolific-token"):
        self.token = token
        self.submissions = {}
        self.bonus_setups = {}
        self.payments = []
        self.fail_next_pay = None
        super().__init__()

    def route(self, method, path, headers, body):
        if headers.get("Authorization") != f"Token {self.token}":
            return 401, {"error": {"detail": "Invalid token"}}
        path = path.split("/api/v1/", 1)[1]
        if method == "GET" and path.startswith("studies/") and path.split("?")[0].endswith("/submissions/"):
            study = path.split("/")[1]
            rows = [s for s in self.submissions.values() if s["study_id"] == study]
            page = 1 if "page=2" not in path else 2
            chunk = rows[:2] if page == 1 else rows[2:]
            nxt = f"{self.url}/studies/{study}/submissions/?page=2" if page == 1 and len(rows) > 2 else None
            return 200, {"results": chunk, "_links": {"next": {"href": nxt}}}
        if method == "GET" and path.startswith("submissions/"):
            sid = path.split("/")[1]
            return (200, self.submissions[sid]) if sid in self.submissions else (404, {"error": {}})
        if method == "POST" and path == "submissions/bulk-approve/":
            for sid in body["submission_ids"]:
                self.submissions[sid]["status"] = "APPROVED"
            return 200, "The request to bulk approve has been made successfully."
        if method == "POST" and path.endswith("/transition/"):
            sid = path.split("/")[1]
            if body.get("action") == "REJECT" and (len(body.get("message", "")) < 100
                                                    or not body.get("rejection_category")):
                return 400, {"error": {"detail": "message must be at least 100 characters"}}
            self.submissions[sid]["status"] = "REJECTED"
            return 200, self.submissions[sid]
        if method == "POST" and path == "submissions/bonus-payments/":
            setup_id = f"bonus{len(self.bonus_setups) + 1:06d}"
            self.bonus_setups[setup_id] = body
            amount = sum(float(line.split(",")[1]) for line in body["csv_bonuses"].splitlines())
            return 201, {"id": setup_id, "study": body["study_id"], "amount": amount,
                         "fees": round(amount / 3, 2), "total_amount": round(amount * 4 / 3, 2), "vat": 0}
        if method == "POST" and path.startswith("bulk-bonus-payments/") and path.endswith("/pay/"):
            if self.fail_next_pay:
                status, self.fail_next_pay = self.fail_next_pay, None
                return status, {"error": {"detail": "server error"}}
            self.payments.append(path.split("/")[1])
            return 202, "Bulk bonus payment is being processed asynchronously."
        if method == "POST" and path == "messages/":
            return 204, {}
        return 404, {"error": {"detail": f"no route {method} {path}"}}


class FakeConnect(FakePlatform):
    """CloudResearch Connect: X-API-KEY auth, assignments per project, approve / reject / bonus
    taking a list, and IDEMPOTENCY-TOKEN making a repeated request a no-op."""

    def __init__(self, key="connect-key"):
        self.key = key
        self.assignments = {}
        self.bonuses = []
        self.seen_tokens = set()
        super().__init__()

    def route(self, method, path, headers, body):
        if headers.get("X-API-KEY") != self.key:
            return 401, {"error": {"title": "Unauthorized", "status": 401}}
        path = path.split("/api/v1/", 1)[1]
        parts = path.split("/")
        if method == "GET" and parts[0] == "assignments":
            return 200, {"assignments": [a for a in self.assignments.values() if a["projectId"] == parts[1]]}
        token = headers.get("IDEMPOTENCY-TOKEN")
        if token in self.seen_tokens:
            return 200, {}
        if method == "POST" and parts[0] == "assignments" and parts[2] in ("approve", "reject"):
            for participant in body["participants"]:
                if parts[2] == "reject" and not participant.get("message"):
                    return 400, {"error": {"detail": "A message is required to reject."}}
                self.assignments[participant["id"]]["status"] = (
                    "Approved" if parts[2] == "approve" else "Rejected")
            self.seen_tokens.add(token)
            return 200, {}
        if method == "POST" and parts[0] == "assignments" and parts[2] == "bonus":
            self.bonuses.extend(body["bonusPayment"])
            self.seen_tokens.add(token)
            return 200, {}
        return 404, {"error": {"detail": f"no route {method} {path}"}}


class FakeToloka(FakePlatform):
    """Toloka as toloka-kit's TolokaClient calls it: OAuth token auth; assignments one by one or
    listed per pool a page at a time (sorted by id, the next page after the last id); a status
    change only from SUBMITTED; bonuses as operations that run once per operation id (a repeat is
    refused with OPERATION_ALREADY_EXISTS and the client reads the first one back); restrictions;
    message threads. Errors carry Toloka's {code, message} body."""

    PAGE = 2

    def __init__(self, token="toloka-token"):
        self.token = token
        self.assignments = {}
        self.bonuses = {}
        self.operations = {}
        self.restrictions = []
        self.threads = []
        super().__init__()
        self.url = self.url.removesuffix("/api/v1")

    def assignment(self, assignment_id, *, user_id, pool_id, status="SUBMITTED"):
        self.assignments[assignment_id] = {
            "id": assignment_id, "task_suite_id": f"suite-{assignment_id}", "pool_id": pool_id,
            "user_id": user_id, "status": status, "reward": 0.5, "mixed": False, "automerged": False,
            "created": "2026-11-20T10:00:00", "submitted": "2026-11-20T10:04:00"}
        return self.assignments[assignment_id]

    @staticmethod
    def _error(status, code, message):
        return status, {"code": code, "message": message, "request_id": "req-1"}

    def route(self, method, path, headers, body):
        if headers.get("Authorization") != f"OAuth {self.token}":
            return self._error(401, "AUTHENTICATION_ERROR", "Invalid token")
        path, _, query = path.partition("?")
        params = dict(parse_qsl(query))
        parts = path.removeprefix("/api/v1/").split("/")
        if method == "GET" and parts == ["assignments"]:
            rows = sorted((a for a in self.assignments.values() if a["pool_id"] == params.get("pool_id")),
                          key=lambda a: a["id"])
            rows = [a for a in rows if a["id"] > params.get("id_gt", "")]
            return 200, {"items": rows[:self.PAGE], "has_more": len(rows) > self.PAGE}
        if parts[0] == "assignments" and len(parts) == 2:
            found = self.assignments.get(parts[1])
            if found is None:
                return self._error(404, "DOES_NOT_EXIST", "Assignment does not exist")
            if method == "GET":
                return 200, found
            if method == "PATCH":
                if found["status"] != "SUBMITTED":
                    return self._error(409, "INAPPROPRIATE_STATUS", f"Assignment is {found['status']}")
                if body.get("status") == "REJECTED" and not body.get("public_comment"):
                    return self._error(400, "VALIDATION_ERROR", "public_comment is required")
                found.update(status=body["status"], public_comment=body.get("public_comment", ""))
                return 200, found
        if method == "POST" and parts == ["user-bonuses"]:
            operation_id = params["operation_id"]
            if operation_id in self.operations:
                return self._error(409, "OPERATION_ALREADY_EXISTS", "Operation already exists")
            bonus_id = f"bonus{len(self.bonuses) + 1}"
            self.bonuses[bonus_id] = {**body, "id": bonus_id, "created": "2026-11-20T11:00:00"}
            self.operations[operation_id] = {
                "id": operation_id, "type": "USER_BONUS.BATCH_CREATE", "status": "SUCCESS",
                "submitted": "2026-11-20T11:00:00", "started": "2026-11-20T11:00:00",
                "finished": "2026-11-20T11:00:01", "parameters": {"skip_invalid_items": False},
                "details": {"total_count": 1, "valid_count": 1, "not_valid_count": 0, "success_count": 1,
                            "failed_count": 0},
                "log": [{"type": "USER_BONUS_CREATE", "success": True, "input": body,
                         "output": {"user_bonus_id": bonus_id}}]}
            return 202, {k: v for k, v in self.operations[operation_id].items() if k != "log"}
        if method == "GET" and parts[0] == "operations":
            operation = self.operations.get(parts[1])
            if operation is None:
                return self._error(404, "DOES_NOT_EXIST", "Operation does not exist")
            if parts[2:] == ["log"]:
                return 200, operation["log"]
            return 200, {k: v for k, v in operation.items() if k != "log"}
        if method == "GET" and parts[0] == "user-bonuses":
            return 200, self.bonuses[parts[1]]
        if method == "PUT" and parts == ["user-restrictions"]:
            self.restrictions.append(body)
            return 201, {**body, "id": f"restriction{len(self.restrictions)}", "created": "2026-11-20T12:00:00"}
        if method == "POST" and parts == ["message-threads", "compose"]:
            self.threads.append(body)
            return 201, {"id": f"thread{len(self.threads)}", "topic": body["topic"], "created": "2026-11-20T12:00:00"}
        return self._error(404, "DOES_NOT_EXIST", f"no route {method} {path}")


def make_researcher(username="researcher", *, can_pay=True):
    from django.contrib.auth.models import Permission, User

    user = User.objects.create_user(username, password="pw", is_staff=True)
    if can_pay:
        user.user_permissions.add(Permission.objects.get(codename="pay_workers"))
        # The crowd platforms' models, and the workforce models whose admin pages they register.
        user.user_permissions.add(*Permission.objects.filter(content_type__app_label="mturk"))
        user.user_permissions.add(*Permission.objects.filter(
            content_type__app_label="annotation", content_type__model__in=[
                "workerblock", "stagequalification", "golditem", "qualificationattempt", "goldanswer",
                "workerqualification"]))
    return User.objects.get(pk=user.pk)
