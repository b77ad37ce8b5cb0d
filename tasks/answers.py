"""Background jobs of answers from endpoints: a start job per tournament, then one job per chunk
of an endpoint model's owed instances (annotation/preferences/answers.py).

Each runs under a lease, so a second delivery of the same job exits at once; a retry resumes from
the call rows, asking nothing that was answered.
"""

from annotation.models import ModelEndpoint, Tournament
from annotation.preferences import answers
from crowdbench.celery import app
from crowdbench.jobs import enqueue
from tasks.jobs import JOB_OPTIONS, lease

# A chunk's endpoint shows what its job is going through: the cause between attempts, the reason
# once they are spent.
_ENDPOINT_STATUS = {**JOB_OPTIONS, "on_status": staticmethod(
    lambda args, status, error: answers.record_job_status(args[0], status, error))}


@app.task(name="tasks.generate_answers", **JOB_OPTIONS)
def generate_answers_job(tournament_id):
    with lease("generate_answers", tournament_id) as mine:
        tournament = Tournament.objects.filter(pk=tournament_id).first()
        if not mine or tournament is None:
            return None
        planned = answers.plan_generation(tournament=tournament)
        for endpoint_id, first, last in planned:
            enqueue("tasks.answer_chunk", endpoint_id, first, last)
        return len(planned)


@app.task(name="tasks.answer_chunk", **_ENDPOINT_STATUS)
def answer_chunk_job(endpoint_id, first, last):
    with lease(f"answer_chunk:{endpoint_id}", first) as mine:
        endpoint = ModelEndpoint.objects.filter(pk=endpoint_id).first()
        if not mine or endpoint is None:
            return None
        return answers.answer_chunk(endpoint=endpoint, first=first, last=last)
