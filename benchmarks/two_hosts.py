"""Two hosts at once on one PostgreSQL, one Redis and one bucket, one of them killed mid-run: is
any lease taken twice, any answer lost or doubled, any background job stranded?

    sudo DATABASE_URL=postgres://postgres@127.0.0.1:5432/ .venv/bin/python benchmarks/two_hosts.py \
        [--instances 160] [--captioners 10] [--verifiers 6] [--kill-after 45] [--redis-db 13] \
        [--death kill|power-cut] [--keepalive 60] [--no-user-timeout] [--timeout 900]

Run as root: each host is a Linux network namespace (`ip netns`) joined to this machine by a veth
pair, 10.77.1.2 and 10.77.2.2, with this machine at 10.77.1.1 and 10.77.2.1. Each host runs
gunicorn bound to its own address and a Celery worker with its own node name (host1@two-hosts,
host2@two-hosts), started from this checkout as docs/operations.md describes; host 2 also runs
the one beat. The shared services stay on this machine's loopback, where PostgreSQL and Redis
listen: the PostgreSQL server of DATABASE_URL (a fresh database, `cb_twohost_bench` by default),
Redis on 127.0.0.1:6379 (database --redis-db, emptied, as broker and cache), moto's S3 server as
the bucket and the tests' OpenAI-compatible loopback server as the reference model (answering
after --model-latency seconds). A socat forwarder on each veth's address carries each host's
connections to them (see benchmarks/README.md for why).

The driver, on this machine, seeds instances awaiting captions, their caption stage (overlap 1)
and verification stage (overlap 2) launched, behind two Prolific studies. Then --captioners and
--verifiers participants, half of them at each host, each a thread with its own cookies that
reaches the site by one name through a sticky "load balancer" (it keeps to its host until a
connection to it fails, then moves to the other), follow the study link and submit, as
annotator.js does, until every instance is verified. Every caption sends a reference job to the
workers; every reference makes verification units. A researcher asks for a snapshot through the
API (written to the bucket by a worker) before, just before and after the kill, and at the end.
At --kill-after seconds the driver SIGKILLs host 1's gunicorn and Celery worker (each its whole
process group); with --death power-cut it first takes host 1's end of its link down, so nothing
host 1 had open is closed from its side, as when a machine loses power. --keepalive is the hosts'
DATABASE_KEEPALIVE_SECONDS, and the forwarders to PostgreSQL keep toward the hosts the TCP
settings PostgreSQL holds for a session our code opened (read from pg_settings of the driver's
own session, which tasks/jobs.py probe_silent_peers set up as it sets up every host's): keepalive
probes, and TCP_USER_TIMEOUT, unacknowledged_limit_ms(--keepalive) (--no-user-timeout leaves it
out, as before it was set). The driver listens to the workers' task events throughout.

A power cut comes with a reply on the wire, the case in which no keepalive probe is sent: just
before the cut a session inside host 1 takes the reference lease of an instance still without
its reference (an advisory lock, as a reference job holds it while it waits for the model) and
asks PostgreSQL for a 2 GB result, which streams to it over a 1 MB/s path of its own, so that
segments are unacknowledged when the link goes. From the cut the driver measures how long that
lease and the forwarder's connection toward the session live on.

At the end it checks through the database, the bucket and the clients' own records, prints the
counts and the load average, and exits 1 if any check fails: among them, that the death hit work
(a job host 1 had taken and not finished, or a submit to it cut) and, with a power cut, that the
dead session's lease was free within 3 x --keepalive. Everything it made (namespaces, veths, the
shaping of the reply's path, processes, forwarders, the database, the Redis database's keys) is
removed on the way out, also on an error or Ctrl-C.
"""

import argparse
import ast
import hashlib
import json
import os
import random
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from contextlib import ExitStack
from dataclasses import dataclass, field
from http.client import HTTPConnection, HTTPException
from http.cookiejar import CookieJar
from pathlib import Path
from urllib.error import HTTPError, URLError
from urllib.parse import urlencode, urlsplit, urlunsplit
from urllib.request import HTTPCookieProcessor, HTTPHandler, Request, build_opener

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.annotator_pages import CAPTION, TOKEN, study_url  # noqa: E402
from benchmarks.support import (  # noqa: E402
    analyse_as_autovacuum_would,
    fresh_database,
    server_environment,
    set_up_django,
    start_gunicorn,
)

# The one name participants reach the site by; the balancer picks the host.
SITE = "crowdbench.test"
WEB_PORT = 8000
BUCKET = "crowdbench-two-hosts"
STUDIES = {"caption": "TWO-HOSTS-CAPTION", "verification": "TWO-HOSTS-VERIFICATION"}
# How long the balancer waits for a host before it moves the participant to the other.
CLIENT_TIMEOUT = 20
CONNECTION_ERRORS = (URLError, ConnectionError, TimeoutError, HTTPException)


@dataclass
class Host:
    number: int

    @property
    def namespace(self):
        return f"cb2h{self.number}"

    @property
    def gateway(self):
        """This machine's address on the host's veth, where the forwarders listen."""
        return f"10.77.{self.number}.1"

    @property
    def address(self):
        return f"10.77.{self.number}.2"

    @property
    def node(self):
        return f"host{self.number}@two-hosts"

    @property
    def run_in(self):
        return ("ip", "netns", "exec", self.namespace)


HOSTS = (Host(1), Host(2))
DOOMED, SURVIVOR = HOSTS


# --- the machinery: namespaces, forwarders, processes ----------------------------------------------


def ip(*arguments, check=True):
    return subprocess.run(["ip", *arguments], check=check, capture_output=True, text=True)


def add_namespace(cleanup, host):
    """The host's namespace, its veth pair and addresses; removed on the way out."""
    outside, inside = f"{host.namespace}h", f"{host.namespace}n"
    # A run killed with SIGKILL leaves its namespace behind; this run's cleanup could not remove it.
    ip("netns", "del", host.namespace, check=False)
    ip("link", "del", outside, check=False)
    ip("netns", "add", host.namespace)
    cleanup.callback(ip, "link", "del", outside, check=False)
    cleanup.callback(ip, "netns", "del", host.namespace, check=False)
    ip("link", "add", outside, "type", "veth", "peer", "name", inside)
    ip("link", "set", inside, "netns", host.namespace)
    ip("addr", "add", f"{host.gateway}/24", "dev", outside)
    ip("link", "set", outside, "up")
    ip("netns", "exec", host.namespace, "ip", "addr", "add", f"{host.address}/24", "dev", inside)
    ip("netns", "exec", host.namespace, "ip", "link", "set", inside, "up")
    ip("netns", "exec", host.namespace, "ip", "link", "set", "lo", "up")


def wait_for_port(host, port, process, what):
    for _ in range(300):
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited ({process.returncode})")
        try:
            socket.create_connection((host, port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{what} does not listen on {host}:{port}")


class Processes:
    """Processes started for the run, each in a process group of its own, so that one host's
    gunicorn or worker dies whole (master and children) and everything is stopped at the end."""

    def __init__(self, cleanup, logs):
        self.logs, self.running = logs, []
        cleanup.callback(self.stop_all)

    def log(self, name):
        log = open(self.logs / f"{name}.log", "w")
        self.running.append(log)
        return log

    def start(self, name, argv, environment=None, *, prefix=()):
        process = subprocess.Popen([*prefix, *argv], cwd=ROOT, env=environment, stdout=self.log(name),
                                   stderr=subprocess.STDOUT, start_new_session=True)
        return self.track(process)

    def track(self, process):
        self.running.append(process)
        return process

    def stop_all(self):
        for running in reversed(self.running):
            if isinstance(running, subprocess.Popen):
                self.stop(running)
            else:
                running.close()

    @staticmethod
    def stop(process):
        try:
            os.killpg(process.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def forward(processes, host, port, peer=None):
    """Connections to this machine's address on the host's veth, `port`, carried to the same port
    on loopback.

    The forwarder is PostgreSQL's peer here, so PostgreSQL's own socket settings would only ever
    reach it; given `peer` (session_settings), the forwarder's socket toward the host keeps them
    in its place. A connection silent for tcp_keepalives_idle is probed as PostgreSQL probes our
    sessions and dropped, with the one it was carried to, when the host does not answer; one
    whose data stays unacknowledged for tcp_user_timeout is dropped too (TCP_USER_TIMEOUT): the
    case of a reply on the wire, when no keepalive probe is sent."""
    listen = f"TCP-LISTEN:{port},bind={host.gateway},reuseaddr,fork"
    peer = peer or {}
    if peer.get("tcp_keepalives_idle"):
        listen += (f",keepalive,keepidle={peer['tcp_keepalives_idle']},"
                   f"keepintvl={peer['tcp_keepalives_interval']},keepcnt={peer['tcp_keepalives_count']}")
    if peer.get("tcp_user_timeout"):
        # socat 1.7 has no name for TCP_USER_TIMEOUT: level IPPROTO_TCP (6), option 18; it sets
        # it on each accepted connection (strace shows it there, in the forked child).
        listen += f",sockopt-int=6:18:{peer['tcp_user_timeout']}"
    forwarder = processes.start(f"forward-{host.number}-{port}", ["socat", listen, f"TCP:127.0.0.1:{port}"])
    wait_for_port(host.gateway, port, forwarder, f"socat on {host.gateway}:{port}")


def session_settings():
    """PostgreSQL's TCP settings for a session our code opened (the driver's own, with the hosts'
    DATABASE_KEEPALIVE_SECONDS): what tasks/jobs.py probe_silent_peers set, or the OS's defaults
    where it set nothing. Keepalive idle and interval in seconds, user timeout in ms."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT name, setting::int FROM pg_settings WHERE name IN ('tcp_keepalives_idle', "
                       "'tcp_keepalives_interval', 'tcp_keepalives_count', 'tcp_user_timeout')")
        return dict(cursor.fetchall())


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


# --- the database ---------------------------------------------------------------------------------


def seed(instances):
    """Instances awaiting captions, their caption (overlap 1) and verification (overlap 2) stages
    launched, a Prolific study for each stage, and a researcher's API token."""
    from django.contrib.auth import get_user_model
    from django.utils import timezone
    from rest_framework.authtoken.models import Token

    from annotation.collection.instructions import add_instance
    from annotation.crowdwork.stages import create_work_units
    from annotation.models import ImageAsset, InstructionFamily, Stage, StageConfig
    from mturk.models import CrowdStudy

    family = InstructionFamily.objects.create(name="Two hosts", target_instances=instances)
    for n in range(instances):
        image = ImageAsset.objects.create(url=f"https://upload.wikimedia.org/two-hosts/{n}.jpg",
                                          licence="CC0 1.0", author="Bench")
        add_instance(family=family, instruction=f"Is this drink hot or cold? ({n})", images=[image])
    for stage, overlap in ((Stage.CAPTION, 1), (Stage.VERIFICATION, 2)):
        StageConfig.objects.create(family=family, stage=stage, overlap=overlap, launched_at=timezone.now())
        CrowdStudy.objects.create(platform="prolific", stage=stage, family=family, name=STUDIES[stage],
                                  external_id=STUDIES[stage], completion_code="BENCH")
    create_work_units(family=family, stage=Stage.CAPTION)
    researcher = get_user_model().objects.create_superuser("researcher", "researcher@example.org", "unused")
    analyse_as_autovacuum_would()
    return family, Token.objects.create(user=researcher).key


# --- the clients ----------------------------------------------------------------------------------


class Balancer(HTTPHandler):
    """A sticky load balancer as one participant meets it: every request to SITE goes to one
    host, until a connection to that host fails; then to the next host."""

    def __init__(self, home):
        super().__init__()
        self.host = home

    def move(self):
        self.host = HOSTS[(HOSTS.index(self.host) + 1) % len(HOSTS)]

    def http_open(self, request):
        return self.do_open(lambda _site, **options: HTTPConnection(self.host.address, WEB_PORT, **options),
                            request)


@dataclass
class Saved:
    """A submission the client was told was saved."""

    stage: str
    assignment_id: int
    worker_id: int
    text: str
    host: int


@dataclass
class Run:
    think: float
    finished: threading.Event = field(default_factory=threading.Event)
    saved: list = field(default_factory=list)
    unanswered: list = field(default_factory=list)  # (name, host) of submits whose connection died
    refused: list = field(default_factory=list)
    moved: set = field(default_factory=set)
    snapshots: list = field(default_factory=list)
    killed_at: float | None = None


def participant(run, name, stage, home):
    """A browser as annotator.js drives it: the study link, then after each submit the page the
    answer names; on a dead connection, the study link again through the balancer."""
    from frontend import tokens

    balancer = Balancer(home)
    opener = build_opener(balancer, HTTPCookieProcessor(CookieJar()))
    pace = random.Random(name)
    link = f"http://{SITE}" + study_url(stage, STUDIES[stage], name)
    url, count = link, 0
    while not run.finished.is_set():
        time.sleep(pace.uniform(0, 2 * run.think))
        try:
            with opener.open(url, timeout=CLIENT_TIMEOUT) as page:
                token = TOKEN.search(page.read().decode())
        except HTTPError as error:
            run.refused.append(f"GET {error.code}")
            time.sleep(1)
            url = link
            continue
        except CONNECTION_ERRORS:
            balancer.move()
            run.moved.add(name)
            url = link
            continue
        if token is None:  # nothing for this participant now: verification waits for references
            url = link
            time.sleep(2)
            continue
        count += 1
        text = f"{CAPTION} ({name} #{count})"
        fields = {"caption-0": text} if stage == "caption" else {"verdict": "correct", "comment": text}
        time.sleep(pace.uniform(0, 2 * run.think))
        body = urlencode({"token": token[1], "active_seconds": "30", **fields}).encode()
        host = balancer.host.number
        try:
            with opener.open(Request(f"http://{SITE}/work/submit/", data=body,
                                     headers={"Accept": "application/json"}), timeout=CLIENT_TIMEOUT) as answer:
                url = f"http://{SITE}" + json.loads(answer.read())["next"]
        except HTTPError as error:
            run.refused.append(f"submit {error.code}")
            url = link
            continue
        except CONNECTION_ERRORS:
            run.unanswered.append((name, host))
            balancer.move()
            run.moved.add(name)
            url = link
            continue
        grant = tokens.read_form_grant(token[1])
        run.saved.append(Saved(stage, grant.assignment_id, grant.worker_id, text, host))


def request_snapshot(run, api_token, home, note):
    """A researcher's POST /api/snapshots/ through the balancer; a dead host is tried no more."""
    balancer = Balancer(home)
    opener = build_opener(balancer)
    for _ in range(len(HOSTS) * 3):
        request = Request(f"http://{SITE}/api/snapshots/", data=json.dumps({"note": note}).encode(),
                          headers={"Authorization": f"Token {api_token}", "Accept": "application/json",
                                   "Content-Type": "application/json"})
        try:
            with opener.open(request, timeout=CLIENT_TIMEOUT) as answer:
                run.snapshots.append(json.loads(answer.read())["version"])
                return
        except CONNECTION_ERRORS:
            balancer.move()
            time.sleep(1)
    raise RuntimeError(f"no host took the snapshot request {note!r}")


class TaskEvents:
    """The workers' task events (celery -E), heard through the shared Redis: which worker took and
    finished which job, and when."""

    def __init__(self):
        from crowdbench.celery import app

        self.app = app
        # uuid: {"name", "args", "events": [(kind, worker node, timestamp, result)]}
        self.tasks = defaultdict(dict)
        self.receiver = None
        self.thread = threading.Thread(target=self._listen, daemon=True, name="task-events")

    def _listen(self):
        with self.app.connection() as connection:
            self.receiver = self.app.events.Receiver(connection, handlers={"*": self._record})
            self.receiver.capture(limit=None, timeout=None, wakeup=False)

    def _record(self, event):
        kind = event["type"]
        if not kind.startswith("task-"):
            return
        task = self.tasks[event["uuid"]]
        if kind == "task-received":
            task.update(name=event["name"], args=event["args"])
        task.setdefault("events", []).append((kind[5:], event["hostname"], event["timestamp"],
                                              event.get("result")))

    def start(self):
        self.thread.start()
        for _ in range(100):
            if self.receiver is not None:
                return self
            time.sleep(0.1)
        raise RuntimeError("could not listen to the workers' events")

    def stop(self):
        if self.receiver is not None:
            self.receiver.should_stop = True


# --- the reply in flight at the cut --------------------------------------------------------------

# What host 1 asks PostgreSQL for just before its power is cut: a reply far larger than every
# buffer on its way (2 GB), so that data toward the host is unacknowledged on PostgreSQL's side of
# the connection (the forwarder's, here) when the link goes. While it is, no keepalive probe is
# sent: only TCP_USER_TIMEOUT, or the kernel's retransmissions giving up (tcp_retries2, about 15
# minutes), end the connection.
REPLY = "SELECT repeat('x', 1000000) FROM generate_series(1, 2000)"
READER = "two-hosts reply in flight"


def read_slowly(dsn, *locks):
    """Run inside host 1 (`two_hosts.py read-slowly DSN NAMESPACE:NUMBER...`): take the first free
    of the advisory locks offered, as tasks/jobs.py `lease` takes a job's, say which and from
    which port, then read REPLY, a row (1 MB) at most every 0.2 s, until killed."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True, application_name=READER) as db:
        for lock in locks:
            if db.execute("SELECT pg_try_advisory_lock(%s, %s)", [int(n) for n in lock.split(":")]).fetchone()[0]:
                break
        else:
            sys.exit("every lease offered is held")
        with socket.socket(fileno=os.dup(db.pgconn.socket)) as own:
            port = own.getsockname()[1]
        print(json.dumps({"lock": lock, "port": port}), flush=True)
        for _row in db.cursor().stream(REPLY):
            time.sleep(0.2)


@dataclass
class HeldReply:
    """Host 1's session with a reply on the wire at the cut, and how long what it held outlived it."""

    process: subprocess.Popen
    instance: int  # whose reference lease the session holds
    port: int  # the session's port on host 1
    postgres_port: int
    at_cut: str = ""  # the forwarder's socket toward the session, as `ss` showed it at the cut
    cut_at: float = 0.0
    lease_free_after: float | None = None
    connection_gone_after: float | None = None
    watched_for: float = 0.0
    stop: threading.Event = field(default_factory=threading.Event)

    def forwarder_socket(self):
        """The forwarder's connection toward the session, as `ss` shows it ("" once it is gone)."""
        shown = subprocess.run(["ss", "-Htnoi", "state", "all", "src", f"{DOOMED.gateway}:{self.postgres_port}",
                                "dst", f"{DOOMED.address}:{self.port}"], capture_output=True, text=True, check=True)
        return " ".join(shown.stdout.split())

    def lease_held(self, cursor):
        cursor.execute("SELECT EXISTS (SELECT 1 FROM pg_locks JOIN pg_stat_activity USING (pid) "
                       "WHERE application_name = %s AND locktype = 'advisory' AND granted)", [READER])
        return cursor.fetchone()[0]

    def watch(self):
        """From the cut, until both are gone or the run ends: when the dead session's lease was
        free, and when the forwarder's connection toward it was gone."""
        from django.db import connection

        try:
            with connection.cursor() as cursor:
                while not self.stop.is_set():
                    self.watched_for = time.monotonic() - self.cut_at
                    if self.lease_free_after is None and not self.lease_held(cursor):
                        self.lease_free_after = self.watched_for
                    if self.connection_gone_after is None and not self.forwarder_socket():
                        self.connection_gone_after = self.watched_for
                    if self.lease_free_after is not None and self.connection_gone_after is not None:
                        return
                    self.stop.wait(0.5)
        finally:
            connection.close()

    def at_cut_summary(self):
        fields = self.at_cut.split()
        if not fields:
            return "gone before the cut"
        shown = [fields[0], f"Send-Q {fields[2]} bytes"]
        shown += re.findall(r"timer:\([^)]*\)|snd_wnd:\d+|unacked:\d+|retrans:[\d/]+", self.at_cut)
        return ", ".join(shown)


def force_reply_in_flight(processes, dsn, family, postgres_port):
    """Host 1's session, started inside it, holding the reference lease of an instance still
    without its reference (the survivor will need it: the instance is not verified without its
    reference, and the sweep leaves leased work alone) and reading REPLY slowly.

    The last instances awaiting their caption are offered first, then the last awaiting their
    reference, the furthest back in the queue; the session takes the first lease no job holds."""
    from annotation.models import Instance
    from tasks.jobs import _lock_ids

    waiting = [pk for status in (Instance.Status.AWAITING_CAPTION, Instance.Status.AWAITING_REFERENCE)
               for pk in family.instances.filter(status=status).order_by("-pk").values_list("pk", flat=True)[:10]]
    if not waiting:
        raise RuntimeError("every instance had its reference at the cut: give --kill-after less")
    locks = [":".join(str(n) for n in _lock_ids("reference", pk)) for pk in waiting]
    reader = processes.track(subprocess.Popen(
        [*DOOMED.run_in, sys.executable, str(Path(__file__).resolve()), "read-slowly", dsn, *locks], cwd=ROOT,
        stdout=subprocess.PIPE, stderr=processes.log("reply-in-flight"), text=True, start_new_session=True))
    ready, _, _ = select.select([reader.stdout], [], [], 120)
    said = reader.stdout.readline() if ready else ""
    if not said:
        raise RuntimeError("the session inside host 1 did not start its reply (see reply-in-flight.log)")
    said = json.loads(said)
    # The reply's own path to host 1 is a slow network, 1 MB/s (HTB on this machine's end of the
    # veth; the rest of host 1's traffic passes unshaped). The reader keeps up with it, so the
    # reply is not held back by a closed window (persist timer, zero-window probes) but in flight,
    # unacknowledged (retransmission timer), as it is across a real network.
    outside = f"{DOOMED.namespace}h"
    for command in (["qdisc", "add", "dev", outside, "root", "handle", "1:", "htb"],
                    ["class", "add", "dev", outside, "parent", "1:", "classid", "1:2", "htb", "rate", "8mbit"],
                    ["filter", "add", "dev", outside, "parent", "1:", "protocol", "ip", "u32",
                     "match", "ip", "dst", f"{DOOMED.address}/32", "match", "ip", "sport", str(postgres_port), "0xffff",
                     "match", "ip", "dport", str(said["port"]), "0xffff", "flowid", "1:2"]):
        subprocess.run(["tc", *command], check=True, capture_output=True)
    return HeldReply(reader, waiting[locks.index(said["lock"])], said["port"], postgres_port)


# --- the checks -----------------------------------------------------------------------------------


def quiet(family, timeout):
    """Wait until every instance is verified, every snapshot built and no recorded job is owed."""
    from annotation.models import Instance, Snapshot
    from tasks.models import Job

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        unfinished = (family.instances.exclude(status=Instance.Status.VERIFIED).exists()
                      or Snapshot.objects.exclude(status=Snapshot.Status.DONE).exists()
                      or Job.objects.exclude(status__in=(Job.Status.DONE, Job.Status.FAILED)).exists())
        if not unfinished:
            return True
        time.sleep(1)
    return False


def lease_counts():
    from django.db.models import Count, F, Q
    from django.utils import timezone

    from annotation.models import Assignment, WorkUnit

    holding = Q(assignments__status=Assignment.Status.SUBMITTED) | Q(
        assignments__status=Assignment.Status.LEASED, assignments__lease_expires_at__gt=timezone.now())
    units = WorkUnit.objects.annotate(held=Count("assignments", filter=holding))
    return {
        "units above their overlap": units.filter(held__gt=F("overlap")).count(),
        "(unit, worker) with two assignments": Assignment.objects.values("unit", "worker")
        .annotate(n=Count("pk")).filter(n__gt=1).count(),
    }


def answer_counts(run):
    from django.db.models import Count

    from annotation.models import Assignment, Caption, Verification

    captions = dict(Caption.objects.filter(assignment__isnull=False).values_list("assignment_id", "texts"))
    verifications = dict(Verification.objects.filter(assignment__isnull=False).values_list("assignment_id",
                                                                                          "comment"))
    submitted = {pk: (status, worker) for pk, status, worker in
                 Assignment.objects.values_list("pk", "status", "worker_id")}
    lost = [s for s in run.saved
            if (captions.get(s.assignment_id) != [s.text] if s.stage == "caption"
                else verifications.get(s.assignment_id) != s.text)
            or submitted.get(s.assignment_id) != (Assignment.Status.SUBMITTED, s.worker_id)]
    return {
        "answers the clients were told were saved, not stored as sent": len(lost),
        "captions beyond one per (instance, worker)": sum(
            row["n"] - 1 for row in Caption.objects.filter(author__isnull=False)
            .values("instance", "author").annotate(n=Count("pk")).filter(n__gt=1)),
        "verifications beyond one per (reference, worker)": sum(
            row["n"] - 1 for row in Verification.objects.filter(worker__isnull=False)
            .values("reference", "worker").annotate(n=Count("pk")).filter(n__gt=1)),
    }


def job_counts(family):
    from django.db.models import Count

    from annotation.crowdwork.stages import units_owed
    from annotation.datasets.snapshots import snapshot_storage
    from annotation.models import Instance, Reference, Snapshot, Stage
    from tasks.models import Job

    bad_files = 0
    for snapshot in Snapshot.objects.filter(status=Snapshot.Status.DONE):
        for entry in snapshot.files:
            if "sha256" in entry and "path" in entry:
                with snapshot_storage().open(entry["path"]) as stored:
                    bad_files += hashlib.sha256(stored.read()).hexdigest() != entry["sha256"]
    return {
        "instances not verified": family.instances.exclude(status=Instance.Status.VERIFIED).count(),
        "stages still owed units": sum(units_owed(family=family, stage=stage)
                                       for stage in (Stage.CAPTION, Stage.VERIFICATION)),
        "instances with two generated references": Reference.objects.filter(source="generated")
        .values("instance").annotate(n=Count("pk")).filter(n__gt=1).count(),
        "snapshots not built": Snapshot.objects.exclude(status=Snapshot.Status.DONE).count(),
        "snapshot files in the bucket not matching their sha256": bad_files,
        "recorded jobs not done": Job.objects.exclude(status=Job.Status.DONE).count(),
    }


def paid_twice(fake, on_the_wire):
    """Model calls paid twice for one prompt, and the instances of those that no call on the wire
    when the host died explains (the docs allow a killed worker the calls it had in flight)."""
    from annotation.models import Reference

    paid = Counter(body["messages"][0]["content"] for body in [*fake.answered, *fake.unread])
    twice = {prompt for prompt, n in paid.items() if n > 1}
    instances = set(Reference.objects.filter(prompt__in=twice).values_list("instance_id", flat=True))
    return sum(paid[prompt] - 1 for prompt in twice), len(instances - on_the_wire)


@dataclass
class WorkerCounts:
    done_while_both_lived: Counter
    dead_unfinished: int  # taken by the dead host, neither done nor failed there
    finished_by_survivor: int  # by a copy that did the work, not one that found it leased and left
    same_message: int  # of those, the very message Redis handed back after the visibility timeout
    references_on_the_wire: set  # instances whose reference job the dead host had started
    resent_by_sweep: int


def worker_counts(events, killed_at):
    """Jobs each worker finished while both lived, and what became of those the dead one held."""
    counts = WorkerCounts(Counter(), 0, 0, 0, set(), 0)
    finished = defaultdict(list)  # (name, args): [(host, timestamp, uuid)]
    for uuid, task in events.tasks.items():
        for kind, hostname, timestamp, result in task.get("events", ()):
            if kind != "succeeded":
                continue
            counts.done_while_both_lived[hostname] += timestamp < killed_at
            # A job that found its work leased by another copy returns None (tasks/*.py).
            if result != "None":
                finished[(task.get("name"), task.get("args"))].append((hostname, timestamp, uuid))
            if task.get("name") == "tasks.requeue_owed" and result:
                counts.resent_by_sweep += int(result)
    for uuid, task in events.tasks.items():
        on_dead = {kind for kind, hostname, *_ in task.get("events", ()) if hostname == DOOMED.node}
        if "received" not in on_dead or on_dead & {"succeeded", "failed"}:
            continue
        counts.dead_unfinished += 1
        later = [entry for entry in finished[(task.get("name"), task.get("args"))]
                 if entry[0] == SURVIVOR.node and entry[1] >= killed_at]
        counts.finished_by_survivor += bool(later)
        counts.same_message += any(entry[2] == uuid for entry in later)
        if task.get("name") == "tasks.generate_reference" and "started" in on_dead:
            counts.references_on_the_wire.add(ast.literal_eval(task["args"])[0])
    return counts


# --- the run --------------------------------------------------------------------------------------


def host_environment(args, gateway, database_url, ports):
    """The environment of every process of a host whose shared services are at `gateway` (the
    same ports on every host: each forwarder listens on its service's own port)."""
    database = urlsplit(database_url)
    netloc = f"{database.username or 'postgres'}@{gateway}:{ports['postgres']}"
    redis = f"redis://{gateway}:{ports['redis']}/{args.redis_db}"
    return server_environment(
        urlunsplit((database.scheme, netloc, database.path, "", "")),
        DJANGO_ALLOWED_HOSTS=",".join([SITE, *(host.address for host in HOSTS)]),
        CELERY_BROKER_URL=redis, CACHE_URL=redis,
        AWS_STORAGE_BUCKET_NAME=BUCKET, AWS_S3_ENDPOINT_URL=f"http://{gateway}:{ports['s3']}",
        AWS_S3_REGION_NAME="us-east-1", AWS_ACCESS_KEY_ID="two-hosts", AWS_SECRET_ACCESS_KEY="two-hosts",
        OPENAI_BASE_URL=f"http://{gateway}:{ports['model']}/v1", OPENAI_API_KEY="two-hosts",
        OPENAI_REFERENCE_MODEL="gpt-4",
        # The sweep and the broker's redelivery on a run's time scale, not production's.
        JOB_SWEEP_SECONDS="5", JOB_REQUEUE_AFTER_SECONDS=str(args.requeue_after),
        CELERY_VISIBILITY_TIMEOUT_SECONDS=str(args.visibility_timeout),
        DATABASE_KEEPALIVE_SECONDS=str(args.keepalive), LOG_LEVEL="INFO")


def start_host(processes, args, host, environment, logs, *, beat):
    server, _ = start_gunicorn(environment, args.web_workers, address=(host.address, WEB_PORT),
                               prefix=host.run_in, start_new_session=True,
                               stderr=processes.log(f"web-{host.number}"))
    processes.track(server)
    worker = processes.start(f"worker-{host.number}", [
        sys.executable, "-m", "celery", "-A", "crowdbench", "worker", "-n", host.node, "-E",
        f"--concurrency={args.concurrency}", "--loglevel=INFO"], environment, prefix=host.run_in)
    started = [server, worker]
    if beat:
        started.append(processes.start("beat", [
            sys.executable, "-m", "celery", "-A", "crowdbench", "beat", "--loglevel=INFO",
            "--schedule", str(logs / "celerybeat-schedule")], environment, prefix=host.run_in))
    return started


def print_counts(title, counts):
    print(title)
    for name, value in counts.items():
        print(f"  {name:<58}{value:>8}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--instances", type=int, default=160)
    parser.add_argument("--captioners", type=int, default=10)
    parser.add_argument("--verifiers", type=int, default=6)
    parser.add_argument("--think", type=float, default=1.0, help="mean seconds before each request")
    parser.add_argument("--kill-after", type=float, default=45.0, help="seconds into the run host 1 dies")
    parser.add_argument("--model-latency", type=float, default=1.5, help="seconds the model takes a reference")
    parser.add_argument("--web-workers", type=int, default=2, help="gunicorn workers per host")
    parser.add_argument("--concurrency", type=int, default=2, help="Celery processes per host")
    parser.add_argument("--requeue-after", type=int, default=20, help="JOB_REQUEUE_AFTER_SECONDS")
    parser.add_argument("--visibility-timeout", type=int, default=30, help="CELERY_VISIBILITY_TIMEOUT_SECONDS")
    parser.add_argument("--death", choices=("kill", "power-cut"), default="kill",
                        help="how host 1 dies: its processes killed (the kernel closes their "
                             "connections), or its link cut first (nothing is closed, as in a power cut)")
    parser.add_argument("--keepalive", type=int, default=60,
                        help="DATABASE_KEEPALIVE_SECONDS of the hosts, and of the forwarders standing in "
                             "for PostgreSQL's end of their connections (0: no probes)")
    parser.add_argument("--no-user-timeout", action="store_true",
                        help="the forwarders to PostgreSQL leave TCP_USER_TIMEOUT out, as PostgreSQL did "
                             "before probe_silent_peers set tcp_user_timeout: a reply on the wire at a "
                             "power cut then holds the dead host's session for about 15 minutes")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds before the run gives up")
    parser.add_argument("--database", default="cb_twohost_bench")
    parser.add_argument("--redis-db", type=int, default=13, help="the Redis database it empties and uses")
    parser.add_argument("--server", default=os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/"),
                        help="a PostgreSQL URL; only its server is used")
    args = parser.parse_args()
    if os.geteuid() != 0 or not shutil.which("socat"):
        sys.exit("two_hosts.py runs as root (ip netns) and needs socat")
    # A TERM or HUP ends the run as Ctrl-C does: through the cleanup below.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda number, frame: sys.exit(128 + number))

    with ExitStack() as cleanup:
        status = run(args, cleanup)
        stopping = time.monotonic()
    print(f"removed in {time.monotonic() - stopping:.0f} s: the namespaces, veths, processes and forwarders, "
          f"database {args.database}, Redis database {args.redis_db}'s keys")
    sys.exit(status)


def run(args, cleanup):
    import boto3

    from tests.openai_fake import FakeOpenAI, completion

    logs = Path(tempfile.mkdtemp(prefix="two-hosts-"))
    print(f"logs in {logs}; {os.cpu_count()} CPUs, load average at the start {os.getloadavg()[0]:.2f}")
    server = urlsplit(args.server)
    ports = {"postgres": server.port or 5432, "redis": 6379, "s3": free_port()}
    redis_cli = ["redis-cli", "-n", str(args.redis_db)]
    subprocess.run([*redis_cli, "flushdb"], check=True, capture_output=True)
    cleanup.callback(subprocess.run, [*redis_cli, "flushdb"], capture_output=True)

    database_url = fresh_database(args.server, args.database)
    cleanup.callback(drop_database, args.server, args.database)
    for host in HOSTS:
        add_namespace(cleanup, host)
    # Registered after the namespaces, so stopped before they are removed.
    processes = Processes(cleanup, logs)
    moto = processes.start("s3", [str(Path(sys.executable).parent / "moto_server"), "-H", "127.0.0.1",
                                  "-p", str(ports["s3"])])
    wait_for_port("127.0.0.1", ports["s3"], moto, "moto's S3 server")
    fake = FakeOpenAI(default=completion("It is hot: steam rises from the cup.")).start()
    fake.latency = args.model_latency
    cleanup.callback(fake.stop)
    ports["model"] = int(fake.base_url.rsplit(":", 1)[1].split("/")[0])

    # The driver is a third machine: it migrates once, as docs/operations.md's upgrades say, and
    # reads the shared services on loopback.
    os.environ.update({**host_environment(args, "127.0.0.1", database_url, ports), "LOG_LEVEL": "WARNING"})
    set_up_django(os.environ["DATABASE_URL"])
    # The forwarders to PostgreSQL take the settings PostgreSQL holds for a session our code opened,
    # not the values the code means to set: with probe_silent_peers gone, so are they.
    peer = session_settings()
    if args.no_user_timeout:
        peer["tcp_user_timeout"] = 0
    for host in HOSTS:
        for name, port in ports.items():
            forward(processes, host, port, peer if name == "postgres" else None)
    boto3.client("s3", endpoint_url=os.environ["AWS_S3_ENDPOINT_URL"], region_name="us-east-1").create_bucket(
        Bucket=BUCKET)
    family, api_token = seed(args.instances)
    from django.db import connections

    connections.close_all()

    doomed = start_host(processes, args, DOOMED, host_environment(args, DOOMED.gateway, database_url, ports),
                        logs, beat=False)
    start_host(processes, args, SURVIVOR, host_environment(args, SURVIVOR.gateway, database_url, ports),
               logs, beat=True)
    events = TaskEvents().start()
    cleanup.callback(events.stop)

    state = Run(think=args.think)
    held = None
    cleanup.callback(state.finished.set)
    people = [(f"C{n:03d}", "caption") for n in range(args.captioners)] + [
        (f"V{n:03d}", "verification") for n in range(args.verifiers)]
    threads = [threading.Thread(target=participant, args=(state, name, stage, HOSTS[n % 2]), daemon=True)
               for n, (name, stage) in enumerate(people)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    print(f"{len(threads)} participants at work, half at each host; host 1 dies after {args.kill_after:.0f} s")

    # Snapshots asked of alternate hosts before, just before and just after the kill.
    plan = [(args.kill_after * 0.4, SURVIVOR), (args.kill_after - 1, DOOMED), (args.kill_after, None),
            (args.kill_after + 2, DOOMED)]
    for at, home in plan:
        time.sleep(max(0.0, started + at - time.monotonic()))
        if home is not None:
            request_snapshot(state, api_token, home, f"two hosts, at {at:.0f} s")
            continue
        if args.death == "power-cut":
            held = force_reply_in_flight(processes, host_environment(args, DOOMED.gateway, database_url,
                                                                     ports)["DATABASE_URL"],
                                         family, ports["postgres"])
            doomed.append(held.process)
            time.sleep(3)  # the reply paced by its slow path, with segments in flight
            held.at_cut = held.forwarder_socket()
            held.cut_at = time.monotonic()
        state.killed_at = time.time()
        if args.death == "power-cut":
            # Its network goes with it: nothing it had open is closed from its side. The host's own
            # end goes down, so this machine keeps its route to it (with the route gone, packets
            # for 10.77.1.2 would leave by the default route and meet whatever answers there).
            ip("netns", "exec", DOOMED.namespace, "ip", "link", "set", f"{DOOMED.namespace}n", "down")
        for process in doomed:
            os.killpg(process.pid, signal.SIGKILL)
        print(f"host 1 dead ({args.death}: SIGKILL to gunicorn's and the worker's process groups"
              f"{', its link down first, with a reply on the wire' if args.death == 'power-cut' else ''}) at "
              f"{time.monotonic() - started:.0f} s, load average {os.getloadavg()[0]:.2f}")
        if held is not None:
            cleanup.callback(held.stop.set)
            watcher = threading.Thread(target=held.watch, daemon=True, name="held-reply")
            watcher.start()

    from annotation.models import Assignment, Instance

    deadline = started + args.timeout
    while family.instances.exclude(status=Instance.Status.VERIFIED).exists() and time.monotonic() < deadline:
        time.sleep(2)
    state.finished.set()
    for thread in threads:
        thread.join(timeout=120)
    request_snapshot(state, api_token, SURVIVOR, "two hosts, at the end")
    settled = quiet(family, max(60.0, deadline - time.monotonic()))
    if held is not None:
        held.stop.set()
        watcher.join(timeout=60)
    elapsed = time.monotonic() - started
    time.sleep(2)  # the last events on their way
    events.stop()

    load = os.getloadavg()
    workers = worker_counts(events, state.killed_at)
    twice, twice_unexplained = paid_twice(fake, workers.references_on_the_wire)
    print(f"\n{args.instances} instances (caption overlap 1, verification overlap 2); {args.captioners} captioners, "
          f"{args.verifiers} verifiers; 2 hosts x (gunicorn {args.web_workers} workers, Celery {args.concurrency}); "
          f"host 1's death: {args.death}, keepalive {args.keepalive or 'off'}; PostgreSQL's end toward the "
          f"hosts: keepalive {peer['tcp_keepalives_idle']} s + {peer['tcp_keepalives_count']} x "
          f"{peer['tcp_keepalives_interval']} s, user timeout {peer['tcp_user_timeout'] or 'off'}"
          f"{' ms' if peer['tcp_user_timeout'] else ''}; model {args.model_latency:g} s a "
          f"reference; sweep every 5 s, owed after {args.requeue_after} s, visibility timeout "
          f"{args.visibility_timeout} s; {elapsed:.0f} s; load average {load[0]:.2f} {load[1]:.2f} "
          f"{load[2]:.2f} ({os.cpu_count()} CPUs)")
    print_counts("clients", {
        "participants that moved host (balancer)": len(state.moved),
        "submits whose connection died (outcome unknown)": len(state.unanswered),
        "  of them to host 1": sum(host == DOOMED.number for _, host in state.unanswered),
        "requests refused (4xx/5xx)": ", ".join(f"{n} {kind}" for kind, n in Counter(state.refused).items()) or 0,
        "snapshots requested": len(state.snapshots),
        "answers the clients were told were saved": len(state.saved),
        "  of them by host 1 / host 2": f"{sum(s.host == 1 for s in state.saved)} / "
                                        f"{sum(s.host == 2 for s in state.saved)}",
        "answers stored": Assignment.objects.filter(status=Assignment.Status.SUBMITTED).count(),
    })
    print_counts("jobs", {
        **{f"finished by {host.node} while both lived": workers.done_while_both_lived[host.node] for host in HOSTS},
        "taken by host 1 and unfinished when it died": workers.dead_unfinished,
        "  of them finished by host 2": workers.finished_by_survivor,
        "  of them the same message, handed back by Redis": workers.same_message,
        "  reference jobs among them with a model call on the wire": len(workers.references_on_the_wire),
        "jobs the sweep sent again (tasks.requeue_owed)": workers.resent_by_sweep,
        "model calls paid (answered + answered to a dead client)": f"{len(fake.answered)} + {len(fake.unread)}",
        "model calls paid twice": twice,
    })
    checks = {
        **lease_counts(),
        **answer_counts(state),
        **job_counts(family),
        "jobs the dead host took and nobody finished": workers.dead_unfinished - workers.finished_by_survivor,
        "prompts paid twice but not on the wire at the death": twice_unexplained,
    }
    failures = [name for name, value in checks.items() if value]
    if not settled:
        failures.append("the run did not settle in time")
    if not all(workers.done_while_both_lived[host.node] for host in HOSTS):
        failures.append("a worker finished no job while both lived")
    if not workers.dead_unfinished and not any(host == DOOMED.number for _, host in state.unanswered):
        failures.append("host 1's death hit no work (no job taken and unfinished, no submit cut)")
    if held is not None:
        bound = 3 * args.keepalive
        print(f"reply in flight at the cut: host 1's session held the reference lease of instance "
              f"{held.instance} and read {REPLY!r} over a 1 MB/s path; the forwarder's socket toward it: "
              f"{held.at_cut_summary()}")
        lease = (f"free {held.lease_free_after:.1f} s after the cut" if held.lease_free_after is not None
                 else f"still held {held.watched_for:.0f} s after the cut")
        gone = (f"gone {held.connection_gone_after:.1f} s after the cut" if held.connection_gone_after is not None
                else f"still there {held.watched_for:.0f} s after the cut")
        print(f"  the lease it held: {lease} (bound: 3 x keepalive = {bound} s)")
        print(f"  the forwarder's connection toward it: {gone}")
        if held.lease_free_after is None or held.lease_free_after > bound:
            failures.append(f"the lease held by host 1's session with a reply in flight outlived 3 x keepalive "
                            f"({bound} s)")
    print_counts("checks (each must be 0)", checks)
    print("FAILED: " + "; ".join(failures) if failures else "all checks passed")
    return 1 if failures else 0


def drop_database(server_url, name):
    import psycopg
    from django.db import connections

    connections.close_all()
    parts = urlsplit(server_url)
    with psycopg.connect(urlunsplit((parts.scheme, parts.netloc, "/postgres", "", "")), autocommit=True) as db:
        db.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


if __name__ == "__main__":
    if sys.argv[1:2] == ["read-slowly"]:
        read_slowly(*sys.argv[2:])
    else:
        main()
