#!/usr/bin/env bash
# The last step of `make run` (after migrate and load_demo): a Celery worker with its beat
# scheduler in the background, the development server in the foreground. Stopping the server
# (Ctrl-C) stops the worker too.
set -euo pipefail

cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
HOST=127.0.0.1
PORT=${PORT:-8000}

touch var/worker.log
log_start=$(wc -c <var/worker.log)

"$VENV/bin/celery" -A crowdbench worker --pool=solo -B --loglevel=info \
    --schedule var/celerybeat-schedule >>var/worker.log 2>&1 &
worker_pid=$!

stop_worker() {
    if kill -0 "$worker_pid" 2>/dev/null; then
        echo "Stopping the Celery worker (pid $worker_pid)..."
        kill -TERM "$worker_pid" 2>/dev/null || true
        wait "$worker_pid" 2>/dev/null || true
    fi
}
trap stop_worker EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Wait for the worker to say it is ready, so a worker that cannot start is reported here rather
# than discovered later as jobs that never run.
printf 'Starting the Celery worker'
worker_ready=no
for _ in $(seq 1 120); do
    if ! kill -0 "$worker_pid" 2>/dev/null; then
        printf '\nThe Celery worker stopped while starting. The end of var/worker.log:\n\n' >&2
        tail -n 25 var/worker.log >&2
        exit 1
    fi
    if tail -c "+$((log_start + 1))" var/worker.log | grep -q 'celery@.* ready\.'; then
        worker_ready=yes
        break
    fi
    printf '.'
    sleep 0.5
done
if [ "$worker_ready" = yes ]; then
    printf ' ready.\n'
else
    printf ' still starting after a minute; see var/worker.log.\n'
fi

cat <<EOF

  crowdbench is running: http://$HOST:$PORT/admin/  (user admin, password ${DEMO_ADMIN_PASSWORD:-crowdbench})
  (the password is the one set when the demo was first loaded; change it in the admin)
  Celery worker: pid $worker_pid, log in var/worker.log
  Press Ctrl-C to stop the server and the worker.

EOF

"$VENV/bin/python" manage.py runserver "$HOST:$PORT"
