"""One settings module for every deployment.

The embedded default needs nothing set: SQLite, media on local disk and a Celery broker kept in
files. Production differs only in values read from the environment (DATABASE_URL,
CELERY_BROKER_URL, AWS_STORAGE_BUCKET_NAME, OPENAI_*), never in code paths.
"""

from datetime import timedelta
from pathlib import Path

import environ
from django.core.exceptions import ImproperlyConfigured

# The REST API's settings are fixed in code, kept beside it.
from crowdbench.api_settings import REST_FRAMEWORK, SPECTACULAR_SETTINGS  # noqa: F401
from crowdbench.setting_parsers import networks, proxy_ssl_header

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = BASE_DIR / "var"

env = environ.Env()
environ.Env.read_env(BASE_DIR / ".env", overwrite=False)

DEBUG = env.bool("DJANGO_DEBUG", default=True)
SECRET_KEY = env("DJANGO_SECRET_KEY", default="crowdbench-insecure-local-key-change-me")
ALLOWED_HOSTS = env.list("DJANGO_ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "[::1]"])
CSRF_TRUSTED_ORIGINS = env.list("DJANGO_CSRF_TRUSTED_ORIGINS", default=[])

# HTTPS. Production (DEBUG off) is HTTPS only by default, since MTurk frames only HTTPS pages: HTTP
# is redirected and browsers are told to keep to HTTPS (HSTS) for a year, subdomains included; the
# preload flag only consents to a listing that someone would still have to submit.
SECURE_SSL_REDIRECT = env.bool("DJANGO_SECURE_SSL_REDIRECT", default=not DEBUG)
SECURE_HSTS_SECONDS = env.int("DJANGO_SECURE_HSTS_SECONDS", default=0 if DEBUG else 365 * 24 * 3600)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS", default=not DEBUG)
SECURE_HSTS_PRELOAD = env.bool("DJANGO_SECURE_HSTS_PRELOAD", default=not DEBUG)


# Behind a proxy that ends TLS, the header it sets on HTTPS requests; only set it when the proxy
# always sets or strips that header, since a client could otherwise claim HTTPS.
SECURE_PROXY_SSL_HEADER = proxy_ssl_header(env("DJANGO_SECURE_PROXY_SSL_HEADER", default=""))

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "storages",
    "rest_framework",
    "rest_framework.authtoken",
    "django_filters",
    "drf_spectacular",
    "health_check",
    "drf_spectacular_sidecar",
    "axes",
    "auditlog",
    "annotation",
    "tasks",
    "mturk",
    "frontend",
    "webhooks",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # Every query of a group-owned model made while answering is narrowed to what the user may see.
    "annotation.group_scope.RequestScopeMiddleware",
    # Names the signed-in researcher as the actor of every audit entry the request writes.
    "auditlog.middleware.AuditlogMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "frontend.arrival.remember_participants",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "crowdbench.middleware.ContentSecurityPolicyMiddleware",
    "crowdbench.middleware.AdminParametersMiddleware",
    # Last, so that it turns a lockout flagged anywhere below into the lockout page.
    "axes.middleware.AxesMiddleware",
]

AUDITLOG_USE_FK_STRING_REPRESENTATION = True  # the audit trail names a changed foreign key by its row

# django-axes watches every password check (admin, /work/login/, API tokens through
# annotation/api/authentication.py) and refuses further ones after AXES_FAILURE_LIMIT failures.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]

ROOT_URLCONF = "crowdbench.urls"
WSGI_APPLICATION = "crowdbench.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        # Project-wide overrides of the admin's own templates (its header links to the dashboard).
        "DIRS": [BASE_DIR / "crowdbench" / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": env.db("DATABASE_URL", default=f"sqlite:///{VAR_DIR / 'crowdbench.sqlite3'}"),
}
# A connection kept between requests saves its set-up (a third of a next-unit request's time on
# PostgreSQL); the health check replaces one the server closed meanwhile, before it is used.
DATABASES["default"]["CONN_MAX_AGE"] = env.int("DATABASE_CONN_MAX_AGE", default=60)
# A host that dies with its network (power, a cut link) closes none of its connections: PostgreSQL
# would keep its sessions, and the job leases and row locks they hold, for the OS's two hours. It
# probes each of our sessions after this many silent seconds instead (tasks/jobs.py).
DATABASE_KEEPALIVE_SECONDS = env.int("DATABASE_KEEPALIVE_SECONDS", default=60)
# The cache the throttles count in (new study participants per address) and confirmations are
# remembered in: shared by every web process in production (Redis, as compose sets), the process's
# own memory for the embedded default, whose development server is one process.
CACHES = {"default": env.cache("CACHE_URL", default="locmemcache://")}
# Every use of the cache goes through crowdbench/shared_cache.py, which treats an unreachable cache
# as a miss; these bound what finding it unreachable costs a request when its host is gone without
# a word (redis-py waits on a silent peer for ever by default). Options in CACHE_URL win.
if CACHES["default"]["BACKEND"].endswith("RedisCache"):
    CACHES["default"].setdefault("OPTIONS", {})
    for option in ("socket_connect_timeout", "socket_timeout"):
        CACHES["default"]["OPTIONS"].setdefault(option, env.float("CACHE_TIMEOUT_SECONDS", default=0.5))
# A count django-ratelimit could not read admits rather than refuses, as the cache's outage does.
RATELIMIT_FAIL_OPEN = True
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # The embedded default runs the web server and a worker side by side on one file.
    DATABASES["default"]["OPTIONS"] = {"timeout": 20, "transaction_mode": "IMMEDIATE"}
    # SQLite creates the database file but not its folder, and var/ is absent on a fresh checkout.
    Path(DATABASES["default"]["NAME"]).parent.mkdir(parents=True, exist_ok=True)

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"
MEDIA_URL = env("MEDIA_URL", default="/media/")
MEDIA_ROOT = Path(env("MEDIA_ROOT", default=str(VAR_DIR / "media")))

AWS_STORAGE_BUCKET_NAME = env("AWS_STORAGE_BUCKET_NAME", default="")
AWS_S3_ENDPOINT_URL = env("AWS_S3_ENDPOINT_URL", default=None)
AWS_S3_REGION_NAME = env("AWS_S3_REGION_NAME", default=None)
AWS_QUERYSTRING_AUTH = env.bool("AWS_QUERYSTRING_AUTH", default=True)
AWS_DEFAULT_ACL = None
STORAGES = {
    "default": {
        "BACKEND": "storages.backends.s3.S3Storage"
        if AWS_STORAGE_BUCKET_NAME
        else "django.core.files.storage.FileSystemStorage",
    },
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}

# Uploads are checked before Pillow decodes them (annotation/collection/uploads.py).
IMAGE_UPLOAD_MAX_BYTES = env.int("IMAGE_UPLOAD_MAX_BYTES", default=10 * 1024 * 1024)
IMAGE_UPLOAD_MAX_PIXELS = env.int("IMAGE_UPLOAD_MAX_PIXELS", default=40_000_000)
DATA_UPLOAD_MAX_MEMORY_SIZE = IMAGE_UPLOAD_MAX_BYTES + 1024 * 1024
FILE_UPLOAD_MAX_MEMORY_SIZE = 2_621_440

# Celery. The default broker keeps messages in files under var/, so `make run` needs no server.
CELERY_BROKER_URL = env("CELERY_BROKER_URL", default="filesystem://localhost//")
if CELERY_BROKER_URL.startswith("filesystem://"):
    _queue_dir = VAR_DIR / "celery-queue"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_queue_dir),
        "data_folder_out": str(_queue_dir),
        "processed_folder": str(VAR_DIR / "celery-processed"),
        "control_folder": str(VAR_DIR / "celery-control"),
        "store_processed": False,
    }
else:
    # Redis hands an unacknowledged job to another worker after this long: a dead worker's jobs
    # wait this long, and a job running longer would run twice (its lease makes the copy exit).
    # A few times the longest job (a judge chunk, ~10 min), and above the longest retry wait.
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "visibility_timeout": env.int("CELERY_VISIBILITY_TIMEOUT_SECONDS", default=3600 // 2),
        # kombu looks for such jobs every 10 s but, by default, scans only every tenth look: a
        # dead worker's job then waited up to 100 s past the timeout. Scanning is one small query.
        "unacked_restore_throttle": 1,
        # An unreachable broker fails a request's enqueue in seconds, not a TCP timeout.
        "socket_connect_timeout": 5,
        "socket_timeout": 10,
    }
# Sending a job retries the broker briefly; past that the job is left to the outbox sweep.
CELERY_TASK_PUBLISH_RETRY_POLICY = {"max_retries": 2, "interval_start": 0, "interval_step": 0.5,
                                    "interval_max": 1}
CELERY_RESULT_BACKEND = env("CELERY_RESULT_BACKEND", default=None)
CELERY_TASK_IGNORE_RESULT = CELERY_RESULT_BACKEND is None
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_IMPORTS = ["tasks.pipeline", "tasks.judging", "tasks.answers", "tasks.platforms", "tasks.exports",
                  "tasks.outbox", "tasks.scoring", "webhooks.tasks"]
# Owed work whose job was queued longer ago than this, and is not running, is queued again.
JOB_REQUEUE_AFTER_SECONDS = env.int("JOB_REQUEUE_AFTER_SECONDS", default=600)
CELERY_BEAT_SCHEDULE = {
    "requeue-owed-jobs": {"task": "tasks.requeue_owed",
                          "schedule": env.float("JOB_SWEEP_SECONDS", default=60.0)},
    "expire-leases": {"task": "tasks.expire_leases", "schedule": 60.0},
    # Worker models refitted on every counted answer, so reliabilities follow reviews and new work.
    "fit-worker-models": {"task": "tasks.fit_worker_models",
                          "schedule": env.float("WORKER_MODEL_FIT_SECONDS", default=3600.0)},
    "sync-platforms": {"task": "tasks.sync_platforms", "schedule": 300.0},
    "poll-mturk-notifications": {"task": "tasks.poll_mturk_notifications", "schedule": 60.0},
}

# Reference generation through any OpenAI-compatible endpoint (paper §2.1).
OPENAI_API_KEY = env("OPENAI_API_KEY", default="")
OPENAI_BASE_URL = env("OPENAI_BASE_URL", default=None)
OPENAI_REFERENCE_MODEL = env("OPENAI_REFERENCE_MODEL", default="")
OPENAI_MAX_RETRIES = env.int("OPENAI_MAX_RETRIES", default=5)
OPENAI_TIMEOUT_SECONDS = env.float("OPENAI_TIMEOUT_SECONDS", default=120.0)
MODEL_JOB_RETRY_BACKOFF_SECONDS = env.int("MODEL_JOB_RETRY_BACKOFF_SECONDS", default=30)
# Full jitter spreads the retries of many jobs hit by one outage; off, each waits the whole backoff.
MODEL_JOB_RETRY_JITTER = env.bool("MODEL_JOB_RETRY_JITTER", default=True)
OPENAI_MAX_OUTPUT_TOKENS = env.int("OPENAI_MAX_OUTPUT_TOKENS", default=512)
# USD per million tokens (input, output); extend through OPENAI_PRICES_JSON for other models.
OPENAI_PRICES = {
    "gpt-4": (30.0, 60.0),
    "gpt-4-turbo": (10.0, 30.0),
    "gpt-4o": (2.5, 10.0),
    "gpt-4o-mini": (0.15, 0.6),
    "gpt-4.1": (2.0, 8.0),
    "gpt-4.1-mini": (0.4, 1.6),
    **{name: tuple(price) for name, price in env.json("OPENAI_PRICES_JSON", default={}).items()},
}

LOGIN_URL = "admin:login"

# Login throttling (django-axes). A sign-in is refused, even with the right password, once either
# the user name or the client address has AXES_FAILURE_LIMIT failures in the last
# AXES_COOLOFF_MINUTES: spreading guesses over many addresses still locks the account, and one
# address cannot walk through many accounts. A success before the limit clears the count.
AXES_FAILURE_LIMIT = env.int("AXES_FAILURE_LIMIT", default=5)
AXES_COOLOFF_TIME = timedelta(minutes=env.int("AXES_COOLOFF_MINUTES", default=15))
AXES_LOCKOUT_PARAMETERS = "crowdbench.lockout.lockout_parameters"
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_CALLABLE = "crowdbench.lockout.lockout_response"
# Keeps every manage.py command from starting with a banner; failures and lockouts are still logged.
AXES_VERBOSE = False
# Behind N proxies, the client address is the Nth from the right of X-Forwarded-For (the entries
# left of it are whatever the client sent); with none, the socket's address.
TRUSTED_PROXY_COUNT = env.int("DJANGO_TRUSTED_PROXY_COUNT", default=0)
if TRUSTED_PROXY_COUNT:
    AXES_IPWARE_PROXY_COUNT = TRUSTED_PROXY_COUNT
    AXES_IPWARE_PROXY_ORDER = "right-most"
    AXES_IPWARE_META_PRECEDENCE_ORDER = ("HTTP_X_FORWARDED_FOR", "REMOTE_ADDR")
else:
    AXES_IPWARE_META_PRECEDENCE_ORDER = ("REMOTE_ADDR",)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env("LOG_LEVEL", default="INFO")},
}

# Keyed hash for worker pseudonyms in exports and reports; rotating it breaks old pseudonyms.
PSEUDONYM_KEY = env("PSEUDONYM_KEY", default=SECRET_KEY)

# LLM judge (paper §4, Appendix F): any OpenAI-compatible server; unset values use OPENAI_*.
JUDGE_MODEL = env("JUDGE_MODEL", default="gpt-4")
JUDGE_BASE_URL = env("JUDGE_BASE_URL", default=None) or OPENAI_BASE_URL
JUDGE_API_KEY = env("JUDGE_API_KEY", default="") or OPENAI_API_KEY
# The paper extracts ill-formatted answers with ChatGPT (Fig. 18); empty: the judge model itself.
JUDGE_FALLBACK_MODEL = env("JUDGE_FALLBACK_MODEL", default="")
JUDGE_CONCURRENCY = env.int("JUDGE_CONCURRENCY", default=4)
JUDGE_MAX_OUTPUT_TOKENS = env.int("JUDGE_MAX_OUTPUT_TOKENS", default=1024)
JUDGE_TEMPERATURE = env.float("JUDGE_TEMPERATURE", default=0.0)
JUDGE_BATCH_POLL_SECONDS = env.float("JUDGE_BATCH_POLL_SECONDS", default=30.0)
# OpenAI bills Batch API tokens at half price.
JUDGE_BATCH_PRICE_FACTOR = env.float("JUDGE_BATCH_PRICE_FACTOR", default=0.5)
# A background run is split into jobs of this many rounds of its concurrent calls (10 rounds at 16
# at a time: 160 calls), so each job is short next to the broker's visibility timeout (up to a
# minute a call: about 10 minutes).
JUDGE_CHUNK_ROUNDS = env.int("JUDGE_CHUNK_ROUNDS", default=10)
# Instances per answer-generation job: at an endpoint's lowest concurrency (1) and a slow model
# (30 s an answer) a job lasts 20 minutes, inside CELERY_VISIBILITY_TIMEOUT_SECONDS.
ANSWER_CHUNK_INSTANCES = env.int("ANSWER_CHUNK_INSTANCES", default=40)

# Annotator pages (frontend/annotator_views.py and the views beside it). MTurk shows them inside its iframe
# (ExternalQuestion), where browsers send cookies only when they are SameSite=None; Secure, and
# Secure needs HTTPS: so cross-site cookies follow DEBUG unless set. Safari may drop them anyway,
# which is why task forms carry their own signed token (frontend/tokens.py).
ANNOTATOR_CROSS_SITE_COOKIES = env.bool("DJANGO_CROSS_SITE_COOKIES", default=not DEBUG)
SESSION_COOKIE_SECURE = env.bool("DJANGO_SESSION_COOKIE_SECURE", default=not DEBUG or ANNOTATOR_CROSS_SITE_COOKIES)
CSRF_COOKIE_SECURE = env.bool("DJANGO_CSRF_COOKIE_SECURE", default=SESSION_COOKIE_SECURE)
if ANNOTATOR_CROSS_SITE_COOKIES and not (SESSION_COOKIE_SECURE and CSRF_COOKIE_SECURE):
    # Browsers drop a SameSite=None cookie that is not Secure, so MTurk workers would lose their session.
    raise ImproperlyConfigured("DJANGO_CROSS_SITE_COOKIES needs DJANGO_SESSION_COOKIE_SECURE and "
                               "DJANGO_CSRF_COOKIE_SECURE on.")
SESSION_COOKIE_SAMESITE = "None" if ANNOTATOR_CROSS_SITE_COOKIES else "Lax"
CSRF_COOKIE_SAMESITE = SESSION_COOKIE_SAMESITE
# Who may frame the annotator pages (CSP frame-ancestors; every other page keeps X-Frame-Options).
# CloudResearch Connect and Prolific open study links in a tab of their own, so they need no entry.
ANNOTATOR_FRAME_ANCESTORS = env.list(
    "ANNOTATOR_FRAME_ANCESTORS",
    default=["https://worker.mturk.com", "https://workersandbox.mturk.com"],
)
# Where a `turkSubmitTo` may point; anything else is refused rather than posted to.
MTURK_SUBMIT_ORIGINS = env.list(
    "MTURK_SUBMIT_ORIGINS", default=["https://www.mturk.com", "https://workersandbox.mturk.com"]
)
# Hosts whose images a worker's browser may load (CSP img-src). An image URL on any other host is
# shown as text, so a worker-given URL never makes another worker's browser call an unknown server.
IMAGE_URL_ALLOWED_HOSTS = env.list(
    "IMAGE_URL_ALLOWED_HOSTS",
    default=["upload.wikimedia.org", "live.staticflickr.com", "api.openverse.org"],
)
# Origins serving our own stored media when it is not on this site (an S3 bucket or its CDN).
IMAGE_MEDIA_ORIGINS = env.list("IMAGE_MEDIA_ORIGINS", default=[])
# How long a stage page's signed token stays good; MTurk assignments may run for hours.
ANNOTATOR_TOKEN_MAX_AGE_SECONDS = env.int("ANNOTATOR_TOKEN_MAX_AGE_SECONDS", default=24 * 3600)
# A lease lapses this many minutes after the last sign of life from its task page (the page sends
# one every LEASE_HEARTBEAT_SECONDS while the worker is active), and at the latest after the
# stage's lease minutes; so a worker who stops or closes the tab holds the task for no longer.
LEASE_IDLE_MINUTES = env.float("LEASE_IDLE_MINUTES", default=5.0)
# New participant ids a study admits from one client address (django-ratelimit's "count/period").
STUDY_NEW_PARTICIPANTS_RATE = env("STUDY_NEW_PARTICIPANTS_RATE", default="10/h")
# How long the signed arrival token a new participant's study link is redirected with stays good
# (frontend/arrival.py): while it does, the browser that made the participant's row may reload the
# page whose reply was lost and is let in again without the platform's confirmation.
STUDY_ARRIVAL_TOKEN_MAX_AGE_SECONDS = env.int("STUDY_ARRIVAL_TOKEN_MAX_AGE_SECONDS", default=15 * 60)
LEASE_HEARTBEAT_SECONDS = env.int("LEASE_HEARTBEAT_SECONDS", default=60)
# The task page tells its worker this long before their lease lapses (issue 38): an idle worker
# then has time to come back before the task can go to someone else.
LEASE_WARNING_SECONDS = env.int("LEASE_WARNING_SECONDS", default=120)
CLOUDRESEARCH_COMPLETE_URL = "https://connect.cloudresearch.com/participant/project/{code}/complete"
PROLIFIC_COMPLETE_URL = "https://app.prolific.com/submissions/complete?cc={code}"

# Crowd platforms (mturk/). MTurk: sandbox unless MTURK_SANDBOX=false; credentials from boto3's
# usual chain (AWS_ACCESS_KEY_ID, ...) or MTURK_ACCESS_KEY_ID / MTURK_SECRET_ACCESS_KEY.
# The site's public address (annotation/public_urls.py): exported image URLs, study links and HITs.
# Unset: links shown in a browser use the address in use; the admin warns before anything leaves.
PUBLIC_BASE_URL = env("PUBLIC_BASE_URL", default="")
MTURK_SANDBOX = env.bool("MTURK_SANDBOX", default=True)
MTURK_ENDPOINT_URL = env("MTURK_ENDPOINT_URL", default="")
MTURK_ACCESS_KEY_ID = env("MTURK_ACCESS_KEY_ID", default="")
MTURK_SECRET_ACCESS_KEY = env("MTURK_SECRET_ACCESS_KEY", default="")
# Attempts in all, the first included; botocore's standard retry mode spaces them (mturk/client.py).
MTURK_MAX_ATTEMPTS = env.int("MTURK_MAX_ATTEMPTS", default=5)
MTURK_SQS_QUEUE_URL = env("MTURK_SQS_QUEUE_URL", default="")
MTURK_SQS_REGION = env("MTURK_SQS_REGION", default="us-east-1")
CLOUDRESEARCH_API_URL = env("CLOUDRESEARCH_API_URL",
                            default="https://connect-api.cloudresearch.com/api/v1")
CLOUDRESEARCH_API_KEY = env("CLOUDRESEARCH_API_KEY", default="")
PROLIFIC_API_URL = env("PROLIFIC_API_URL", default="https://api.prolific.com/api/v1")
PROLIFIC_API_TOKEN = env("PROLIFIC_API_TOKEN", default="")
# Toloka's API through toloka-kit (mturk/platforms/toloka.py): https://toloka.dev, or the sandbox
# https://sandbox.toloka.dev. The token is an OAuth token or an API key from the requester's profile.
TOLOKA_API_URL = env("TOLOKA_API_URL", default="https://toloka.dev")
TOLOKA_API_TOKEN = env("TOLOKA_API_TOKEN", default="")
# Messages to workers from the admin, per worker in 24 hours (mturk/services/reviewing.py).
WORKER_MESSAGES_PER_DAY = env.int("WORKER_MESSAGES_PER_DAY", default=3)
PLATFORM_HTTP_TIMEOUT_SECONDS = env.float("PLATFORM_HTTP_TIMEOUT_SECONDS", default=30.0)
PLATFORM_HTTP_MAX_ATTEMPTS = env.int("PLATFORM_HTTP_MAX_ATTEMPTS", default=4)
PLATFORM_HTTP_RETRY_BASE_SECONDS = env.float("PLATFORM_HTTP_RETRY_BASE_SECONDS", default=1.0)
# Also the longest Retry-After we wait for; told to wait longer, we give up at once (platforms/http.py).
PLATFORM_HTTP_RETRY_MAX_SECONDS = env.float("PLATFORM_HTTP_RETRY_MAX_SECONDS", default=30.0)
# Pay planning (paper §2.2 paid $18/h). MTurk's fees are built in; the others' service fees depend
# on the account, so they are values to set (e.g. {"prolific": 0.428}); unset, a plan assumes the
# platform's academic rate and says so (mturk/pay.py).
TARGET_HOURLY_WAGE_USD = env("TARGET_HOURLY_WAGE_USD", default="18.00")
PLATFORM_FEE_RATES = env.json("PLATFORM_FEE_RATES_JSON", default={})

# Snapshots and the REST API (issue #6). Snapshots are stored through their own storage: a folder
# under var/ by default (not under MEDIA_ROOT, so not served), the S3 bucket's "snapshots/" prefix
# when AWS_STORAGE_BUCKET_NAME is set.
SNAPSHOTS_LOCATION = env("SNAPSHOTS_LOCATION", default="snapshots" if AWS_STORAGE_BUCKET_NAME
                         else str(VAR_DIR / "snapshots"))
STORAGES["snapshots"] = {
    "BACKEND": STORAGES["default"]["BACKEND"],
    "OPTIONS": {"location": SNAPSHOTS_LOCATION},
}
# A leaderboard's figures, drawn once per stored result by its job and served as files
# (annotation/scoring/stored_figures.py): not under MEDIA_ROOT either, since only researchers see them.
STORAGES["figures"] = {
    "BACKEND": STORAGES["default"]["BACKEND"],
    "OPTIONS": {"location": env("FIGURES_LOCATION", default="figures" if AWS_STORAGE_BUCKET_NAME
                                else str(VAR_DIR / "figures"))},
}
# Rows fetched per round trip (a server-side cursor on PostgreSQL) and per Parquet row group.
EXPORT_CHUNK_ROWS = env.int("EXPORT_CHUNK_ROWS", default=5000)
# Pushing a snapshot to the Hugging Face Hub (`manage.py push_snapshot`, docs/huggingface.md): a
# token with write access, the dataset repository (owner/name), the Hub's address, and whether a
# repository the push creates is private.
HUGGINGFACE_TOKEN = env("HUGGINGFACE_TOKEN", default="")
HUGGINGFACE_DATASET_REPO = env("HUGGINGFACE_DATASET_REPO", default="")
HUGGINGFACE_ENDPOINT = env("HUGGINGFACE_ENDPOINT", default="https://huggingface.co")
HUGGINGFACE_PRIVATE = env.bool("HUGGINGFACE_PRIVATE", default=True)

# E-mail (Django's own). Printed to the console unless EMAIL_HOST names an SMTP server; another
# backend (e.g. django.core.mail.backends.locmem.EmailBackend in tests) through EMAIL_BACKEND.
EMAIL_HOST = env("EMAIL_HOST", default="")
EMAIL_BACKEND = env("EMAIL_BACKEND", default="django.core.mail.backends.smtp.EmailBackend" if EMAIL_HOST
                    else "django.core.mail.backends.console.EmailBackend")
EMAIL_PORT = env.int("EMAIL_PORT", default=587)
EMAIL_HOST_USER = env("EMAIL_HOST_USER", default="")
EMAIL_HOST_PASSWORD = env("EMAIL_HOST_PASSWORD", default="")
EMAIL_USE_TLS = env.bool("EMAIL_USE_TLS", default=True)
EMAIL_USE_SSL = env.bool("EMAIL_USE_SSL", default=False)
EMAIL_TIMEOUT = env.int("EMAIL_TIMEOUT_SECONDS", default=30)
DEFAULT_FROM_EMAIL = env("DEFAULT_FROM_EMAIL", default="crowdbench <crowdbench@localhost>")
SERVER_EMAIL = env("SERVER_EMAIL", default=DEFAULT_FROM_EMAIL)
# Django's mail_admins (and server errors, with DEBUG off) go to these addresses, comma-separated.
ADMINS = [(address, address) for address in env.list("DJANGO_ADMINS", default=[])]

# Notifications (webhooks/): the researchers told by e-mail (empty: the ADMINS), and of which events
# (crowdbench/events.py).
NOTIFY_EMAILS = env.list("NOTIFY_EMAILS", default=[])
NOTIFY_EVENTS = env.list("NOTIFY_EVENTS", default=["study.completed", "judge_run.failed", "worker.paused"])
# Webhook deliveries: the time a receiver has to answer, and the attempts before a delivery is
# given up (the waits between them double from the base up to the cap: with the defaults, about
# 75 minutes in all). The cap stays below CELERY_VISIBILITY_TIMEOUT_SECONDS, so a waiting retry is
# not handed to a second worker.
WEBHOOK_TIMEOUT_SECONDS = env.float("WEBHOOK_TIMEOUT_SECONDS", default=10.0)
WEBHOOK_MAX_ATTEMPTS = env.int("WEBHOOK_MAX_ATTEMPTS", default=10)
WEBHOOK_RETRY_BASE_SECONDS = env.float("WEBHOOK_RETRY_BASE_SECONDS", default=30.0)
WEBHOOK_RETRY_MAX_SECONDS = env.float("WEBHOOK_RETRY_MAX_SECONDS", default=900.0)


# The networks (CIDRs) that webhook URLs and a tournament's endpoint models may reach although they
# are internal (loopback, private, link-local, ...); empty: the public internet only (crowdbench/outbound.py).
WEBHOOK_ALLOWED_NETWORKS = networks("WEBHOOK_ALLOWED_NETWORKS", env.list("WEBHOOK_ALLOWED_NETWORKS", default=[]))
ENDPOINT_MODEL_ALLOWED_NETWORKS = networks("ENDPOINT_MODEL_ALLOWED_NETWORKS",
                                            env.list("ENDPOINT_MODEL_ALLOWED_NETWORKS", default=[]))
# The environment variables an endpoint model may name for its key, whose value is sent to the
# address a researcher types: the operator names them, or any (the secret key, a database URL) would go.
ENDPOINT_MODEL_KEY_VARIABLES = env.list("ENDPOINT_MODEL_KEY_VARIABLES", default=[])
