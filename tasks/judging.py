"""Background jobs of LLM judging: a start job, one job per chunk of battles, and a finish job.

Each loads the run and calls one service of annotation/judging/runner.py under a lease, so a
second delivery of the same job exits at once. A retry resumes: answers already received are
stored.
"""

from annotation.judging import runner
from annotation.models import JudgeRun
from crowdbench.celery import app
from crowdbench.jobs import enqueue
from tasks.jobs import JOB_OPTIONS, lease

# A run shows what its jobs are going through: "retrying" with the cause, "failed" with the reason.
_RUN_STATUS = {**JOB_OPTIONS, "on_status": staticmethod(lambda args, status, error:
                                                        runner.record_job_status(args[0], status, error))}


def _run(run_id):
    return JudgeRun.objects.filter(pk=run_id).first()


@app.task(name="tasks.run_judge", **_RUN_STATUS)
def run_judge_job(run_id):
    with lease("judge_run", run_id) as mine:
        run = _run(run_id)
        if not mine or run is None:
            return None
        chunks = runner.start_judge_run(run=run)
        for index in chunks:
            enqueue("tasks.judge_chunk", run_id, index)
        if not chunks:
            enqueue("tasks.finish_judge_run", run_id)
        return len(chunks)


@app.task(name="tasks.judge_chunk", **_RUN_STATUS)
def judge_chunk_job(run_id, index):
    with lease(f"judge_chunk:{run_id}", index) as mine:
        run = _run(run_id)
        if not mine or run is None:
            return None
        if runner.judge_chunk(run=run, index=index):
            enqueue("tasks.finish_judge_run", run_id)
        return index


@app.task(name="tasks.finish_judge_run", **_RUN_STATUS)
def finish_judge_run_job(run_id):
    with lease("judge_run", run_id) as mine:
        run = _run(run_id)
        if not mine or run is None:
            return None
        return runner.finish_judge_run(run=run).status
