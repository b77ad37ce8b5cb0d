"""Production settings pass Django's deployment checks, and HTTPS settings come from the environment."""

import os
import secrets
import subprocess
import sys

import pytest

from tests.paths import PROJECT

pytestmark = pytest.mark.integration

ROOT = PROJECT


def _production_env(**extra):
    env = {key: value for key, value in os.environ.items() if not key.startswith(("DJANGO_", "AXES_"))}
    env.pop("DATABASE_URL", None)
    env.update(DJANGO_DEBUG="false", DJANGO_SECRET_KEY=secrets.token_urlsafe(50),
               DJANGO_ALLOWED_HOSTS="crowdbench.example.org",
               DJANGO_CSRF_TRUSTED_ORIGINS="https://crowdbench.example.org", **extra)
    return env


def _manage(*args, env):
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)


def test_check_deploy_with_production_values_prints_no_warning():
    result = _manage("check", "--deploy", "--fail-level", "WARNING", env=_production_env())

    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues (0 silenced)." in result.stdout
    assert "WARNING" not in result.stdout + result.stderr


def test_https_settings_are_read_from_the_environment():
    env = _production_env(DJANGO_SECURE_HSTS_SECONDS="600", DJANGO_SECURE_HSTS_PRELOAD="false",
                          DJANGO_SECURE_SSL_REDIRECT="false", DJANGO_TRUSTED_PROXY_COUNT="1",
                          DJANGO_SECURE_PROXY_SSL_HEADER="X-Forwarded-Proto: https")
    code = ("from django.conf import settings as s; print(s.SECURE_HSTS_SECONDS, s.SECURE_HSTS_PRELOAD, "
            "s.SECURE_SSL_REDIRECT, s.SECURE_PROXY_SSL_HEADER, s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE)")
    result = _manage("shell", "-c", code, env=env)

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "600 False False ('HTTP_X_FORWARDED_PROTO', 'https') True True"


def test_a_malformed_proxy_header_setting_stops_the_start_with_its_name():
    result = _manage("check", env=_production_env(DJANGO_SECURE_PROXY_SSL_HEADER="https"))

    assert result.returncode != 0
    assert "DJANGO_SECURE_PROXY_SSL_HEADER" in result.stderr


def test_production_redirects_http_to_https_and_sends_hsts_behind_the_proxy(client, settings, db):
    settings.SECURE_SSL_REDIRECT = True
    settings.SECURE_HSTS_SECONDS = 31536000
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

    plain = client.get("/work/login/")
    proxied = client.get("/work/login/", HTTP_X_FORWARDED_PROTO="https")

    assert plain.status_code == 301 and plain["Location"].startswith("https://")
    assert proxied.status_code == 200
    assert proxied["Strict-Transport-Security"].startswith("max-age=31536000")
