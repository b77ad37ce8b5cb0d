"""`make production-check`: run the production processes docker/compose.yaml names, with its
commands and settings, from this checkout's environment, walk one smoke journey through HTTP, and
stop everything.

What runs: the compose `web` command (migrate, then gunicorn with DEBUG off from
production.env.example), the `worker` and `beat` commands, `redis-server` with the compose
command's AOF flag on a port of its own, a database of its own on the PostgreSQL server at
PRODUCTION_CHECK_DATABASE_URL, and moto's server in MinIO's place as the S3 store. The model is
the loopback OpenAI-compatible server of the tests. What does not run: Docker itself (images,
container networking, the healthchecks and the `create-bucket` container).

The journey: an annotator submits a caption (MTurk link), the worker generates the reference, a
verifier accepts it, a researcher requests a snapshot through the API, the files are read back
from S3 and compared with the manifest, and /health/ reports every service up.
"""

import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlencode, urlsplit

import psycopg
import yaml

ROOT = Path(__file__).resolve().parent.parent
COMPOSE = ROOT / "docker" / "compose.yaml"
ENV_EXAMPLE = ROOT / "docker" / "production.env.example"
DATABASE_SERVER = os.environ.get("PRODUCTION_CHECK_DATABASE_URL",
                                 "postgres://postgres@127.0.0.1:5432/crowdbench_production_check")
WAIT_SECONDS = 120


# --- what compose says -----------------------------------------------------------------------------


def compose():
    return yaml.safe_load(COMPOSE.read_text())


def env_file(path=ENV_EXAMPLE):
    values = {}
    for line in path.read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            name, _, value = line.partition("=")
            values[name.strip()] = value.strip()
    return values


def service_command(spec, service):
    """The service's command as argv; `sh -c "a && b"` stays a shell command, as compose runs it."""
    command = spec["services"][service]["command"]
    return shlex.split(command) if isinstance(command, str) else list(command)


def local_command(argv, *, web_port, beat_schedule):
    """The compose command with only what names the container changed: the address gunicorn binds
    and where beat keeps its schedule."""
    text = shlex.join(argv)
    text = text.replace("0.0.0.0:8000", f"127.0.0.1:{web_port}")
    text = text.replace("/app/var/celerybeat-schedule", str(beat_schedule))
    return shlex.split(text)


def app_environment(spec, *, database_url, redis_url, s3_url, web_port, openai_url):
    """production.env.example, then the compose x-app environment, pointed at the local services."""
    environment = {**env_file(), **spec["x-app"]["environment"]}
    local = {
        "DATABASE_URL": database_url,
        "CELERY_BROKER_URL": redis_url,
        "CACHE_URL": redis_url.rsplit("/", 1)[0] + "/1",
        "AWS_S3_ENDPOINT_URL": s3_url,
        "AWS_S3_REGION_NAME": "us-east-1",
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1",
        "DJANGO_CSRF_TRUSTED_ORIGINS": f"http://127.0.0.1:{web_port}",
        "PUBLIC_BASE_URL": f"http://127.0.0.1:{web_port}",
        "OPENAI_BASE_URL": openai_url,
        "OPENAI_API_KEY": "production-check",
        # gunicorn sits behind a TLS proxy in production; the check speaks for that proxy (Http),
        # so the HTTPS redirect and secure cookies stay as production has them.
        "DJANGO_SECURE_PROXY_SSL_HEADER": "X-Forwarded-Proto: https",
    }
    unknown = set(local) - {"AWS_S3_REGION_NAME", "PUBLIC_BASE_URL", "DJANGO_ALLOWED_HOSTS",
                            "DJANGO_CSRF_TRUSTED_ORIGINS", "DJANGO_SECURE_PROXY_SSL_HEADER"} - set(environment)
    if unknown:
        raise SystemExit(f"compose no longer sets {sorted(unknown)}; update this check")
    environment.update(local)
    return {name: str(value) for name, value in environment.items()}


# --- local services --------------------------------------------------------------------------------


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_for_port(port, what, process):
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"{what} exited ({process.returncode})")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"{what} did not listen on {port}")


class Processes:
    def __init__(self, logs):
        self.logs, self.running = logs, []

    def start(self, name, argv, *, env=None):
        log = open(self.logs / f"{name}.log", "w")
        print(f"  start {name}: {shlex.join(argv)}")
        process = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True)
        self.running.append((name, process, log))
        return process

    def stop(self):
        for name, process, log in reversed(self.running):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
                try:
                    process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()
            log.close()
            print(f"  stopped {name} ({process.returncode})")

    def tail(self, name, lines=30):
        return "\n".join((self.logs / f"{name}.log").read_text().splitlines()[-lines:])


def fresh_database():
    parts = urlsplit(DATABASE_SERVER)
    name = parts.path.lstrip("/")
    admin = parts._replace(path="/postgres").geturl()
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        connection.execute(f'CREATE DATABASE "{name}"')
    return DATABASE_SERVER, lambda: _drop(admin, name)


def _drop(admin, name):
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# --- HTTP --------------------------------------------------------------------------------------------


class Http:
    def __init__(self, base, token=None):
        self.base, self.token = base, token

    def request(self, method, path, *, data=None, json_body=None, accept="application/json"):
        headers = {"Accept": accept, "X-Forwarded-Proto": "https"}
        body = None
        if self.token:
            headers["Authorization"] = f"Token {self.token}"
        if json_body is not None:
            body, headers["Content-Type"] = json.dumps(json_body).encode(), "application/json"
        elif data is not None:
            body = urlencode(data, doseq=True).encode()
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        request = urllib.request.Request(self.base + path, data=body, method=method,
                                         headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as error:
            return error.code, error.read()


def healthy(http):
    status, body = http.request("GET", "/health/?format=json")
    return body.decode() if status == 200 else None


def expect(condition, message):
    if not condition:
        raise SystemExit(f"FAILED: {message}")
    print(f"  ok  {message}")


def poll(what, check, seconds=WAIT_SECONDS):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        result = check()
        if result:
            return result
        time.sleep(0.5)
    raise SystemExit(f"FAILED: timed out waiting for {what}")


def manage(env, *args):
    result = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env,
                            capture_output=True, text=True)
    if result.returncode:
        raise SystemExit(f"manage.py {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")
    return result.stdout


def django_query(env, code):
    """A read of the database the journey cannot see through HTTP (which unit an HIT points at)."""
    return json.loads(manage(env, "shell", "-c", code).strip().splitlines()[-1])


ACCESS_LINE = re.compile(r'"(?P<method>[A-Z]+) (?P<path>\S+) HTTP/[\d.]+" (?P<status>\d{3}) ')
TOKEN_FIELD = re.compile(r'name="token" value="([^"]+)"')


def published_as_hit(env, unit_id):
    """The unit recorded as an MTurk HIT, as the admin's "publish batch" records it (MTurk itself
    is not reachable from here)."""
    return django_query(env, (
        "import json; from decimal import Decimal; from annotation.models import WorkUnit; "
        "from mturk.models import CrowdStudy, Hit; "
        f"unit = WorkUnit.objects.get(pk={unit_id}); "
        "study, _ = CrowdStudy.objects.get_or_create(platform='mturk', stage=unit.stage, "
        "name='Production check ' + unit.stage); "
        "hit, _ = Hit.objects.get_or_create(study=study, unit=unit, defaults={'hit_id': "
        f"'3CHECKHIT{unit_id:08d}', 'hit_type_id': '3CHECKTYPE', 'environment': 'sandbox', "
        "'max_assignments': unit.overlap, 'reward_usd': Decimal('0.50'), 'status': 'open'}); "
        "print(json.dumps(hit.hit_id))"))


def annotator_submit(http, env, unit_id, worker_id, fields):
    query = urlencode({"assignmentId": f"A{worker_id}{unit_id}", "hitId": published_as_hit(env, unit_id),
                       "workerId": worker_id, "turkSubmitTo": "https://workersandbox.mturk.com"})
    status, page = http.request("GET", f"/work/unit/{unit_id}/?{query}", accept="text/html")
    expect(status == 200, f"annotator page of unit {unit_id} loads ({status})")
    found = TOKEN_FIELD.search(page.decode())
    if found is None:
        raise SystemExit(f"FAILED: unit {unit_id}'s page is no task form:\n{page.decode()[-1500:]}")
    token = found.group(1)
    status, body = http.request("POST", "/work/submit/", data={"token": token, **fields})
    expect(status == 200 and json.loads(body).get("ok"), f"submit of unit {unit_id} is saved ({status})")


# --- the check -------------------------------------------------------------------------------------


def journey(env, base, s3):
    manage(env, "createsuperuser", "--noinput", "--username", "checker", "--email", "c@example.org")
    token = manage(env, "drf_create_token", "checker").split()[2]
    api = Http(base, token)
    annotators = Http(base)

    expect(poll("/health/ to be 200", lambda: healthy(api), 60), f"/health/ is 200: {healthy(api)}")

    unit_id, instance_id, images = django_query(env, (
        "import json; from annotation.models import WorkUnit; "
        "u = WorkUnit.objects.filter(stage='caption', status='open', assignments__isnull=True)"
        ".order_by('id').first(); "
        "print(json.dumps([u.pk, u.instance_id, u.instance.instanceimage_set.count()]))"))
    annotator_submit(annotators, env, unit_id, "ACHECKCAPTION", {
        f"caption-{n}": f"A detailed caption of image {n + 1} written for the production check: a "
                        "tall white rocket stands on its launch pad between steel towers."
        for n in range(images)})

    def instance_status():
        code, payload = api.request("GET", f"/api/instances/{instance_id}/")
        return code == 200 and json.loads(payload)["status"] == "awaiting_verification"

    poll("the worker's reference", instance_status)
    expect(True, f"the worker generated instance {instance_id}'s reference through the model")

    units = django_query(env, (
        "import json; from annotation.models import WorkUnit; "
        f"print(json.dumps(list(WorkUnit.objects.filter(stage='verification', instance_id={instance_id})"
        ".values_list('pk', flat=True))))"))
    expect(len(units) == 1, "the reference waits for verification")
    for n in range(2):  # the demo asks two verifiers
        annotator_submit(annotators, env, units[0], f"ACHECKVERIFY{n}", {"verdict": "correct"})
    code, payload = api.request("GET", f"/api/instances/{instance_id}/")
    expect(json.loads(payload)["status"] == "verified", "two verifiers verified the instance")

    status, body = api.request("POST", "/api/snapshots/", json_body={"note": "production check"})
    expect(status == 202, f"snapshot requested ({status})")
    version = json.loads(body)["version"]

    def snapshot_done():
        code, payload = api.request("GET", f"/api/snapshots/{version}/")
        snapshot = json.loads(payload)
        if snapshot["status"] == "failed":
            raise SystemExit(f"FAILED: snapshot failed: {snapshot['error']}")
        return snapshot if snapshot["status"] == "done" else None

    snapshot = poll("the snapshot job", snapshot_done)
    expect(True, f"the worker built snapshot v{version} ({len(snapshot['files'])} files)")
    for entry in snapshot["files"]:
        key = f"{env.get('SNAPSHOTS_LOCATION', 'snapshots')}/{entry['path']}"
        data = s3.get_object(Bucket=env["AWS_STORAGE_BUCKET_NAME"], Key=key)["Body"].read()
        expect(hashlib.sha256(data).hexdigest() == entry["sha256"],
               f"s3://{env['AWS_STORAGE_BUCKET_NAME']}/{key} downloaded, {len(data)} bytes, sha256 matches")
    expect(poll("/health/ to be 200", lambda: healthy(api), 60), f"/health/ still 200: {healthy(api)}")
    # Last: the benchmark this deployment built (the demo world, its snapshot read back from S3) holds
    # no row its rules forbid.
    expect("no violation" in manage(env, "check_benchmark"), "manage.py check_benchmark finds no violation")


def main():
    sys.path.insert(0, str(ROOT))
    import boto3

    from tests.openai_fake import FakeOpenAI, completion

    spec = compose()
    work = Path(tempfile.mkdtemp(prefix="crowdbench-production-check-"))
    processes = Processes(work)
    web_port, redis_port, s3_port = free_port(), free_port(), free_port()
    fake = FakeOpenAI(default=completion("The rocket stands on its pad between two towers.")).start()
    drop_database = None
    started = time.monotonic()
    print(f"production check in {work}")
    try:
        database_url, drop_database = fresh_database()
        redis_argv = service_command(spec, "redis")
        expect("--appendonly" in redis_argv and redis_argv[redis_argv.index("--appendonly") + 1] == "yes",
               "compose runs Redis with AOF persistence")
        redis = processes.start("redis", [shutil.which("redis-server"), *redis_argv[1:], "--port",
                                          str(redis_port), "--bind", "127.0.0.1", "--dir", str(work)])
        wait_for_port(redis_port, "redis", redis)
        moto = processes.start("s3", [str(Path(sys.executable).parent / "moto_server"), "-H",
                                      "127.0.0.1", "-p", str(s3_port)])
        wait_for_port(s3_port, "moto server", moto)
        env = app_environment(spec, database_url=database_url,
                              redis_url=f"redis://127.0.0.1:{redis_port}/0",
                              s3_url=f"http://127.0.0.1:{s3_port}", web_port=web_port,
                              openai_url=fake.base_url)
        env = {**{k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "CELERY_",
                                                                           "DATABASE_", "AWS_"))},
               **env, "PYTHONPATH": str(ROOT),
               "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
        env["DJANGO_SUPERUSER_PASSWORD"] = "production-check-password"
        expect(env["DJANGO_DEBUG"] == "false", "DEBUG is off, as production.env.example says")
        s3 = boto3.client("s3", endpoint_url=env["AWS_S3_ENDPOINT_URL"], region_name="us-east-1",
                          aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
                          aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"])
        s3.create_bucket(Bucket=env["AWS_STORAGE_BUCKET_NAME"])  # compose's create-bucket service

        manage(env, "collectstatic", "--noinput", "-v0")  # the Dockerfile's build step
        schedule = work / "celerybeat-schedule"
        web = processes.start("web", local_command(service_command(spec, "web"), web_port=web_port,
                                                   beat_schedule=schedule), env=env)
        wait_for_port(web_port, "gunicorn", web)
        for service in ("worker", "beat"):
            processes.start(service, local_command(service_command(spec, service), web_port=web_port,
                                                   beat_schedule=schedule), env=env)
        manage(env, "load_demo")
        base = f"http://127.0.0.1:{web_port}"
        journey(env, base, s3)
        status, _ = Http(base).request("GET", "/admin/login/", accept="text/html")
        expect(status == 200, "the admin login page is served by gunicorn with DEBUG off (static via whitenoise)")
        errors = [line for line in (work / "web.log").read_text().splitlines()
                  if (match := ACCESS_LINE.search(line)) and match["status"].startswith("5")
                  and not (match["path"].startswith("/health/") and match["status"] == "503")]
        expect(not errors, f"gunicorn answered no request with a 5xx (a health check may say 503): {errors}")
        print(f"PASSED in {time.monotonic() - started:.0f} s: web, worker, beat, PostgreSQL, Redis (AOF), "
              f"S3 (moto), {len(fake.requests)} model request(s)")
    except BaseException:
        for name in ("web", "worker", "beat"):
            if (work / f"{name}.log").exists():
                print(f"--- the end of {name}.log ---\n{processes.tail(name)}")
        raise
    finally:
        processes.stop()
        fake.stop()
        if drop_database:
            drop_database()


if __name__ == "__main__":
    main()
