#!/usr/bin/env bash
# Start the PostgreSQL and Redis servers the test suite uses, when installed but stopped.
set -euo pipefail

pg_up() { pg_isready -q -h 127.0.0.1 -p 5432; }
if ! pg_up; then
    if command -v pg_ctlcluster >/dev/null; then
        version=$(ls /etc/postgresql | sort -V | tail -n 1)
        pg_ctlcluster --skip-systemctl-redirect "$version" main start
    else
        echo "PostgreSQL is not installed: apt-get install postgresql, or set DATABASE_URL." >&2
        exit 1
    fi
    for _ in $(seq 1 30); do pg_up && break; sleep 1; done
    pg_up || { echo "PostgreSQL did not start on 127.0.0.1:5432" >&2; exit 1; }
fi

redis_up() { redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; }
if ! redis_up; then
    if command -v redis-server >/dev/null; then
        mkdir -p /var/lib/redis /var/log/redis
        redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
            --dir /var/lib/redis --logfile /var/log/redis/ci.log
    else
        echo "Redis is not installed: apt-get install redis-server, or set CELERY_BROKER_URL." >&2
        exit 1
    fi
    for _ in $(seq 1 30); do redis_up && break; sleep 1; done
    redis_up || { echo "Redis did not start on 127.0.0.1:6379" >&2; exit 1; }
fi
