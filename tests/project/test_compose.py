"""docker/compose.yaml, the Dockerfile and the production check agree on commands and settings."""

import importlib.util
import re
from pathlib import Path

from django.conf import settings

ROOT = Path(settings.BASE_DIR)
_spec = importlib.util.spec_from_file_location("production_check", ROOT / "scripts/production_check.py")
production_check = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(production_check)


def test_compose_names_web_worker_beat_and_the_backing_services():
    spec = production_check.compose()
    assert {"web", "worker", "beat", "postgres", "redis", "minio"} <= set(spec["services"])


def test_production_check_runs_compose_commands_changing_only_address_and_schedule_path(tmp_path):
    spec = production_check.compose()
    web = production_check.service_command(spec, "web")
    assert web[:2] == ["sh", "-c"]
    assert "manage.py migrate --noinput" in web[2] and "gunicorn crowdbench.wsgi:application" in web[2]

    local = production_check.local_command(web, web_port=9999, beat_schedule=tmp_path / "s")
    assert local[2] == web[2].replace("0.0.0.0:8000", "127.0.0.1:9999")
    beat = production_check.service_command(spec, "beat")
    assert beat[:4] == ["celery", "-A", "crowdbench", "beat"]
    assert production_check.local_command(beat, web_port=1, beat_schedule=tmp_path / "s")[-1] == str(
        tmp_path / "s")
    worker = production_check.service_command(spec, "worker")
    assert production_check.local_command(worker, web_port=1, beat_schedule=tmp_path) == worker
    assert worker[:4] == ["celery", "-A", "crowdbench", "worker"]


def test_compose_redis_persists_with_aof():
    redis = production_check.service_command(production_check.compose(), "redis")
    assert redis[0] == "redis-server" and redis[redis.index("--appendonly") + 1] == "yes"


def test_every_variable_compose_and_the_env_example_set_is_read_by_settings():
    spec = production_check.compose()
    names = set(spec["x-app"]["environment"]) | set(production_check.env_file())
    source = (ROOT / "crowdbench/settings.py").read_text()
    read = set(re.findall(r'env(?:\.\w+)?\("([A-Z0-9_]+)"', source))
    # Read by libraries from the environment: boto3 (django-storages) takes the AWS keys itself.
    assert names - read <= {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}, names - read


def test_production_env_example_turns_debug_off():
    assert production_check.env_file()["DJANGO_DEBUG"] == "false"


def test_the_image_holds_every_package_the_project_installs():
    dockerfile = (ROOT / "docker/Dockerfile").read_text()
    pyproject = (ROOT / "pyproject.toml").read_text()
    packages = re.search(r'include = \[([^\]]+)\]', pyproject).group(1)
    for package in re.findall(r'"(\w+)\*"', packages):
        assert f"COPY {package} ./{package}" in dockerfile, package


def test_production_check_points_the_app_at_local_services_with_compose_values():
    spec = production_check.compose()
    env = production_check.app_environment(spec, database_url="postgres://db", redis_url="redis://r",
                                           s3_url="http://s3", web_port=8123, openai_url="http://ai")
    assert (env["DATABASE_URL"], env["CELERY_BROKER_URL"], env["AWS_S3_ENDPOINT_URL"]) == (
        "postgres://db", "redis://r", "http://s3")
    assert env["AWS_STORAGE_BUCKET_NAME"] == spec["x-app"]["environment"]["AWS_STORAGE_BUCKET_NAME"]
    assert env["DJANGO_DEBUG"] == "false"
