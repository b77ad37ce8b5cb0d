"""A loopback HTTP server speaking enough of the Hugging Face Hub's API for `HfApi.create_repo` and
`HfApi.upload_folder`: repository creation, the card's YAML check, preupload (regular or LFS, with
the oid of a file the repository holds already, so the client leaves out what has not changed),
the LFS batch API with its basic transfer (PUT to a presigned URL, then verify), the NDJSON commit,
and the repository's info (which the client reads when nothing changed).

The real `huggingface_hub` client talks to it over TCP, so its requests are the ones a push to the
Hub makes. Xet storage (hf_xet's own protocol to a content-addressed store) is not spoken: a test
that pushes through this server turns Xet off in the client, which then uses LFS as it does
without hf_xet.
"""

import base64
import hashlib
import json
import re
import secrets
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import yaml

# The Hub stores these as LFS (its default .gitattributes), and any file whose sample is binary.
_LFS_SUFFIXES = (".parquet", ".arrow", ".bin")


@dataclass
class Repo:
    repo_type: str
    private: bool
    files: dict = field(default_factory=dict)  # path -> bytes, as of the last commit
    lfs_paths: set = field(default_factory=set)
    commits: list = field(default_factory=list)  # per commit: its header, and the paths it wrote

    @property
    def head(self):
        return hashlib.sha1(f"commit {len(self.commits)}".encode()).hexdigest() if self.commits else "0" * 40


@dataclass
class Request:
    method: str
    path: str
    authorization: str


class FakeHub:
    def __init__(self, *, token):
        self.token = token  # the one token with write access
        self.repos = {}  # "datasets/owner/name" -> Repo
        self.lfs_objects = {}  # sha256 -> bytes, uploaded but not yet committed
        self.upload_signatures = {}  # sha256 -> the signature its presigned upload URL carries
        self.requests = []
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def start(self):
        self.thread.start()
        return self

    def stop(self):
        self.server.shutdown()
        self.server.server_close()

    def dataset(self, repo_id):
        return self.repos[f"datasets/{repo_id}"]


def _handler(hub):
    routes = (
        ("POST", re.compile(r"^/api/repos/create$"), "_create_repo"),
        ("POST", re.compile(r"^/api/validate-yaml$"), "_validate_yaml"),
        ("POST", re.compile(r"^/api/(?P<kind>\w+)s/(?P<repo>[^/]+/[^/]+)/preupload/(?P<rev>[^/]+)$"), "_preupload"),
        ("POST", re.compile(r"^/(?P<kind>\w+)s/(?P<repo>[^/]+/[^/]+)\.git/info/lfs/objects/batch$"), "_lfs_batch"),
        ("PUT", re.compile(r"^/lfs-upload/(?P<oid>[0-9a-f]{64})$"), "_lfs_put"),
        ("POST", re.compile(r"^/lfs-verify/(?P<oid>[0-9a-f]{64})$"), "_lfs_verify"),
        ("POST", re.compile(r"^/api/(?P<kind>\w+)s/(?P<repo>[^/]+/[^/]+)/commit/(?P<rev>[^/]+)$"), "_commit"),
        ("GET", re.compile(r"^/api/(?P<kind>\w+)s/(?P<repo>[^/]+/[^/]+)/revision/(?P<rev>[^/]+)$"), "_info"),
    )

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def _route(self, method):
            path, _, query = self.path.partition("?")
            with hub.lock:
                hub.requests.append(Request(method, path, self.headers.get("Authorization", "")))
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            # LFS uploads go to a presigned storage URL (S3 on the Hub), which carries no token.
            presigned = path.startswith("/lfs-upload/") and query == f"signature={hub.upload_signatures.get(path[12:])}"
            if not presigned and self.headers.get("Authorization", "") != f"Bearer {hub.token}":
                return self._send(401, {"error": "Invalid credentials in Authorization header"})
            for route_method, pattern, name in routes:
                match = pattern.match(path)
                if route_method == method and match:
                    with hub.lock:
                        return getattr(self, name)(body, **match.groupdict())
            return self._send(404, {"error": f"No route for {method} {path}"})

        def do_POST(self):
            self._route("POST")

        def do_PUT(self):
            self._route("PUT")

        def do_GET(self):
            self._route("GET")

        def _send(self, status, payload):
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _repo(self, kind, repo):
            return hub.repos.get(f"{kind}s/{repo}")

        def _create_repo(self, body):
            payload = json.loads(body)
            key = f"{payload['type']}s/{payload['organization']}/{payload['name']}"
            if key in hub.repos:
                return self._send(409, {"error": "You already created this dataset repo", "url": f"{hub.url}/{key}"})
            hub.repos[key] = Repo(repo_type=payload["type"], private=payload.get("visibility") == "private")
            return self._send(200, {"url": f"{hub.url}/{key}", "name": key.split("/", 1)[1]})

        def _validate_yaml(self, body):
            content = json.loads(body)["content"]
            if not content.startswith("---\n"):
                return self._send(200, {"warnings": [{"message": "empty or missing yaml metadata"}]})
            try:
                metadata = yaml.safe_load(content.split("---\n")[1])
            except yaml.YAMLError as error:
                return self._send(400, {"error": f"Invalid metadata in README.md.\n- {error}"})
            if not isinstance(metadata, dict) or not isinstance(metadata.get("license"), str):
                return self._send(400, {"error": "Invalid metadata in README.md.\n- \"license\" must be a string"})
            return self._send(200, {"errors": [], "warnings": []})

        def _preupload(self, body, kind, repo, rev):
            target = self._repo(kind, repo)
            if target is None:
                return self._send(404, {"error": "Repository not found"})
            files = []
            for entry in json.loads(body)["files"]:
                sample = base64.b64decode(entry["sample"])
                lfs = entry["path"].endswith(_LFS_SUFFIXES) or b"\x00" in sample or entry["size"] > 10 << 20
                answer = {"path": entry["path"], "uploadMode": "lfs" if lfs else "regular", "shouldIgnore": False}
                held = target.files.get(entry["path"])
                if held is not None:
                    # An LFS file's oid is its sha256, a regular file's its git blob sha1.
                    answer["oid"] = (hashlib.sha256(held).hexdigest() if entry["path"] in target.lfs_paths
                                     else hashlib.sha1(b"blob %d\x00" % len(held) + held).hexdigest())
                files.append(answer)
            return self._send(200, {"files": files, "commitOid": "0" * 40})

        def _lfs_batch(self, body, kind, repo):
            payload = json.loads(body)
            objects = []
            for item in payload["objects"]:
                answer = {"oid": item["oid"], "size": item["size"]}
                if item["oid"] not in hub.lfs_objects:
                    signature = hub.upload_signatures.setdefault(item["oid"], secrets.token_hex(8))
                    upload = f"{hub.url}/lfs-upload/{item['oid']}?signature={signature}"
                    answer["actions"] = {"upload": {"href": upload},
                                         "verify": {"href": f"{hub.url}/lfs-verify/{item['oid']}"}}
                objects.append(answer)
            return self._send(200, {"transfer": "basic", "objects": objects})

        def _lfs_put(self, body, oid):
            if hashlib.sha256(body).hexdigest() != oid:
                return self._send(400, {"error": "sha256 does not match the object id"})
            hub.lfs_objects[oid] = body
            return self._send(200, {})

        def _lfs_verify(self, body, oid):
            payload = json.loads(body)
            stored = hub.lfs_objects.get(oid)
            if stored is None or len(stored) != payload["size"]:
                return self._send(404, {"error": "object not uploaded"})
            return self._send(200, {})

        def _commit(self, body, kind, repo, rev):
            target = self._repo(kind, repo)
            if target is None:
                return self._send(404, {"error": "Repository not found"})
            lines = [json.loads(line) for line in body.splitlines() if line.strip()]
            header = next(line["value"] for line in lines if line["key"] == "header")
            files, lfs_paths, written = dict(target.files), set(target.lfs_paths), []
            for line in lines:
                value = line["value"]
                if line["key"] == "file":
                    files[value["path"]] = base64.b64decode(value["content"])
                    lfs_paths.discard(value["path"])
                elif line["key"] == "lfsFile":
                    if value["oid"] not in hub.lfs_objects:
                        return self._send(400, {"error": f"LFS object {value['oid']} was never uploaded"})
                    files[value["path"]] = hub.lfs_objects[value["oid"]]
                    lfs_paths.add(value["path"])
                elif line["key"] in ("deletedFile", "deletedFolder"):
                    files.pop(value["path"], None)
                if line["key"] != "header":
                    written.append(value["path"])
            target.files, target.lfs_paths = files, lfs_paths
            target.commits.append({**header, "paths": sorted(written)})
            return self._send(200, {"commitUrl": f"{hub.url}/{kind}s/{repo}/commit/{target.head}",
                                    "commitOid": target.head, "success": True})

        def _info(self, body, kind, repo, rev):
            target = self._repo(kind, repo)
            if target is None:
                return self._send(404, {"error": "Repository not found"})
            return self._send(200, {"id": repo, "sha": target.head, "private": target.private})

    return Handler
