import re
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from annotation.exceptions import AnnotationError
from annotation.judging import progress
from annotation.judging.parsing import combine_orderings, parse_overall, parse_prometheus
from annotation.judging.prompts import (
    EXTRACTION_SYSTEM,
    REFERENCE_BACKED_SYSTEM,
    REFERENCE_FREE_SYSTEM,
    VISION_CRITERIA,
)
from annotation.judging.runner import create_judge_run, run_judge
from annotation.models import JudgeCall, JudgeRun
from annotation.scoring.battles import judge_battles, judge_rubric_scores
from tests.factories import FamilyFactory
from tests.openai_fake import ScriptedResponse, completion, rate_limited
from tests.scoring_factories import create_tournament, verified_instance, with_responses

pytestmark = pytest.mark.django_db

CAPTION = "A skier in a green jacket and burgundy pants stands on white snow."
RUBRIC = (
    "Does the response answer the instruction correctly given the image?\n"
    "Score 1: wrong. Score 2: mostly wrong. Score 3: partly right. Score 4: right, minor "
    "slips. Score 5: right and complete."
)


def one_battle_tournament(**options):
    family = options.pop("family", None) or FamilyFactory()
    instance = verified_instance(family=family, caption=[CAPTION])
    with_responses(instance, "llava", "otter")
    tournament = create_tournament(name=options.pop("name", "judged"), include_reference=False, **options)
    battle = tournament.battles.select_related("response_a", "response_b").get()
    return tournament, battle


def judge(tournament, mode=JudgeRun.Mode.REFERENCE_FREE, **options):
    # One thread, so the scripted answers meet the requests in order: A shown first, then B.
    run = create_judge_run(
        tournament=tournament, mode=mode, concurrency=options.pop("concurrency", 1), **options
    )
    return run_judge(run=run)


def refusal(text):
    body = completion("").body
    body["choices"][0]["message"] = {"role": "assistant", "content": None, "refusal": text}
    return ScriptedResponse(200, body)


def last_user_text(request):
    return request.body["messages"][-1]["content"]


# --- parsing -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, position",
    [
        ("Step 1: ...\nOverall, Response A is better.", 1),
        ("Overall, Response 2 is better.", 2),
        ("Overall, Response 1 is better.", 1),
        ("overall, response b is slightly better", 2),
        ("Overall, Response A is better. On reflection... Overall, Response B is better.", 2),
        ("Both are wrong; I cannot choose.", None),
    ],
)
def test_parse_overall_reads_the_last_verdict(text, position):
    assert parse_overall(text) == position


def test_parse_prometheus_reads_feedback_and_result():
    assert parse_prometheus("Feedback: Accurate and complete. [RESULT] 4") == (
        "Accurate and complete.",
        4,
    )
    assert parse_prometheus("Feedback: no score given")[1] is None


@pytest.mark.parametrize(
    "winners, expected",
    [
        (["a", "a"], "a"),
        (["a", "b"], "tie"),
        (["b", "tie"], "b"),
        (["tie", "tie"], "tie"),
    ],
)
def test_combine_orderings_counts_wins_and_calls_equal_a_tie(winners, expected):
    assert combine_orderings(winners) == expected


# --- the text judge ------------------------------------------------------------------------------


def test_reference_free_judge_asks_both_orderings_with_the_papers_prompt(judge_server):
    tournament, battle = one_battle_tournament()
    judge_server.script(
        completion("Step 1: ...\nOverall, Response A is better."),
        completion("Step 1: ...\nOverall, Response 2 is better."),
    )
    run = judge(tournament)
    first, second = judge_server.requests
    assert first.headers["authorization"] == "Bearer judge-key"
    assert [m["role"] for m in first.body["messages"]] == ["system", "user", "assistant", "user"]
    assert first.body["messages"][0]["content"] == REFERENCE_FREE_SYSTEM
    assert f"Image context: {CAPTION}\n" in last_user_text(first)
    assert f"Response A: {battle.response_a.text}\nResponse B: {battle.response_b.text}" in (
        last_user_text(first)
    )
    assert f"Response A: {battle.response_b.text}\nResponse B: {battle.response_a.text}" in (
        last_user_text(second)
    )
    assert last_user_text(first).endswith(
        'finish your response with "Overall, Response X is better." where X is either A or B.'
    )
    ab, ba = run.judgements.order_by("ordering")
    assert (ab.winner, ba.winner) == ("a", "a")
    assert ab.cot.startswith("Step 1") and not ab.used_fallback
    assert run.status == JudgeRun.Status.DONE and run.progress == "2/2"


def test_reference_backed_judge_shows_the_verified_reference(judge_server):
    tournament, battle = one_battle_tournament()
    judge_server.script(
        completion("Overall, Response A is better."), completion("Overall, Response A is better.")
    )
    judge(tournament, JudgeRun.Mode.REFERENCE_BACKED)
    request = judge_server.requests[0]
    assert request.body["messages"][0]["content"] == REFERENCE_BACKED_SYSTEM
    assert f"High quality reference: {battle.instance.reference_output}\n" in last_user_text(
        request
    )


def test_orderings_that_disagree_make_a_tie(judge_server):
    tournament, battle = one_battle_tournament()
    # "Response A" is a in the first ordering and b in the second: one win each.
    judge_server.script(
        completion("Overall, Response A is better."), completion("Overall, Response A is better.")
    )
    run = judge(tournament)
    assert sorted(run.judgements.values_list("winner", flat=True)) == ["a", "b"]
    frame = judge_battles(run=run)
    assert list(frame["winner"]) == ["tie"]
    assert (frame["model_a"].iloc[0], frame["model_b"].iloc[0]) == (
        battle.response_a.model_name,
        battle.response_b.model_name,
    )


def test_unparseable_answer_goes_to_the_extraction_prompt(judge_server):
    tournament, _ = one_battle_tournament()
    judge_server.script(
        completion("Response B explains more, so I lean towards it."),
        completion("Overall, Response A is better."),  # b is shown first here
        completion("Final Answer: B"),
    )
    run = judge(tournament)
    fallback = judge_server.requests[2]
    assert fallback.body["messages"][0]["content"] == EXTRACTION_SYSTEM
    assert len(fallback.body["messages"]) == 6  # system, two worked examples, the answer
    assert last_user_text(fallback) == (
        "Response B explains more, so I lean towards it.\n"
        "Please extract the final answer from the above text."
    )
    ab = run.judgements.get(ordering="ab")
    assert (ab.winner, ab.used_fallback, ab.refused) == ("b", True, False)
    assert run.fallback_calls == 1 and run.progress == "3/3"
    assert list(judge_battles(run=run)["winner"]) == ["model_b"]


def test_refusal_goes_to_the_extraction_prompt_and_ends_a_tie(judge_server):
    tournament, _ = one_battle_tournament()
    judge_server.script(
        refusal("I'm sorry, but I can't help with comparing these."),
        completion("Overall, Response A is better."),
        completion("Final Answer: Unknown."),
    )
    run = judge(tournament)
    ab = run.judgements.get(ordering="ab")
    assert (ab.winner, ab.used_fallback, ab.refused) == ("tie", True, True)
    assert ab.cot == "I'm sorry, but I can't help with comparing these."
    # One win (b, from the second ordering) against an undecided first ordering.
    assert list(judge_battles(run=run)["winner"]) == ["model_b"]


def test_running_the_judge_again_answers_from_the_cache(judge_server):
    tournament, _ = one_battle_tournament()
    judge_server.script(
        completion("Overall, Response A is better."), completion("Overall, Response B is better.")
    )
    first = judge(tournament)
    second = judge(tournament)
    assert len(judge_server.requests) == 2
    assert JudgeCall.objects.count() == 2
    assert (second.cached_calls, second.cost_usd, second.progress) == (2, Decimal(0), "2/2")
    assert list(second.judgements.order_by("ordering").values_list("winner", flat=True)) == (
        list(first.judgements.order_by("ordering").values_list("winner", flat=True))
    )


def test_tokens_and_cost_are_recorded_per_run(judge_server):
    tournament, _ = one_battle_tournament()
    judge_server.script(
        completion("Overall, Response A is better.", prompt_tokens=1000, completion_tokens=200),
        completion("Overall, Response A is better.", prompt_tokens=1000, completion_tokens=200),
    )
    run = judge(tournament)
    # gpt-4 at $30 / $60 per million tokens.
    assert (run.prompt_tokens, run.completion_tokens) == (2000, 400)
    assert run.cost_usd == Decimal("0.084000")


def test_a_model_without_a_known_price_is_said_to_have_one_unknown_never_to_cost_nothing(judge_server, settings):
    settings.OPENAI_PRICES = {}
    tournament, _ = one_battle_tournament()
    judge_server.script(
        completion("Overall, Response A is better.", prompt_tokens=1000, completion_tokens=200),
        completion("Overall, Response A is better.", prompt_tokens=1000, completion_tokens=200),
    )
    run = judge(tournament)
    assert (run.prompt_tokens, run.cost_usd, run.unpriced_calls) == (2000, Decimal(0), 2)
    assert list(JudgeCall.objects.filter(run=run).values_list("cost_usd", flat=True)) == [None, None]
    assert run.cost_text == "price unknown"


def test_rate_limits_are_retried_by_the_client(judge_server):
    tournament, _ = one_battle_tournament()
    judge_server.script(
        rate_limited(),
        completion("Overall, Response A is better."),
        completion("Overall, Response B is better."),
    )
    run = judge(tournament)
    assert len(judge_server.requests) == 3
    assert run.judgements.count() == 2


def test_concurrent_calls_judge_every_battle(judge_server):
    instance = verified_instance(caption=[CAPTION])
    with_responses(instance, "llava", "otter", "idefics", "lynx")
    tournament = create_tournament(name="many", include_reference=False)
    judge_server.default = completion("Overall, Response A is better.")
    run = judge(tournament, concurrency=4)
    assert len(judge_server.requests) == 12  # 6 battles, 2 orderings each
    assert run.judgements.count() == 12
    assert set(judge_battles(run=run)["winner"]) == {"tie"}


def test_a_run_of_several_chunks_keeps_its_connections_from_one_chunk_to_the_next(judge_server, settings):
    # Each chunk is a job of its own; a client per chunk opened every connection again, and the
    # calls waited on the handshakes (benchmarks/judge.py).
    settings.JUDGE_CHUNK_ROUNDS = 1
    instance = verified_instance(caption=[CAPTION])
    with_responses(instance, "llava", "otter", "idefics", "lynx")
    tournament = create_tournament(name="chunked", include_reference=False)
    judge_server.default = completion("Overall, Response A is better.")
    run = judge(tournament, concurrency=2)
    assert len(progress.chunks(run)) == 6  # one battle (two orderings) per chunk
    assert run.judgements.count() == 12
    assert len(judge_server.connections) <= 2


def test_a_runs_recount_sends_the_same_statements_however_many_battles_it_judged(judge_server):
    # The counters are recounted after every chunk: one that read the run's call ids into Python
    # and sent them back grew with the run, and so did the run's time between its chunks.
    judge_server.default = completion("Overall, Response A is better.")
    small, _ = one_battle_tournament(name="small")
    small_run = judge(small)
    instance = verified_instance(caption=[CAPTION])
    with_responses(instance, "llava", "otter", "idefics", "lynx")
    large_run = judge(create_tournament(name="large", include_reference=False), concurrency=4)
    assert large_run.judgements.count() >= 6 * small_run.judgements.count()

    def recount_statements(run):
        with CaptureQueriesContext(connection) as captured:
            progress.refresh_counters(run)
            assert progress.run_is_judged(run)
        return [re.sub(r"\d+", "N", query["sql"]) for query in captured]

    assert recount_statements(small_run) == recount_statements(large_run)


def test_progress_never_reads_past_its_total_while_fallback_answers_wait_for_their_judgements(
        judge_server, monkeypatch):
    # A first answer that says nothing is asked again with the extraction prompt; that answer is
    # paid (and counted) before its judgement is stored. Counted alone, it ran past the total.
    from annotation.judging import runner

    instance = verified_instance(caption=[CAPTION])
    with_responses(instance, "llava", "otter", "idefics")
    tournament = create_tournament(name="three battles", include_reference=False)
    judge_server.default = completion("Both have merits; I cannot choose between them.")
    seen = []
    store = runner._store_judgements

    def counted_first(run, judgements, fields):
        progress.refresh_counters(run)
        run.refresh_from_db()
        seen.append((run.done_calls, run.total_calls))
        store(run, judgements, fields)
        run.refresh_from_db()
        seen.append((run.done_calls, run.total_calls))

    monkeypatch.setattr(runner, "_store_judgements", counted_first)
    run = judge(tournament)
    assert run.fallback_calls == 1  # the six undecided answers share one extraction request
    assert seen and all(done <= total for done, total in seen), seen
    assert (run.done_calls, run.total_calls) == (7, 7)


def test_a_failed_call_fails_the_run_and_a_rerun_pays_only_for_the_rest(judge_server, settings):
    settings.OPENAI_MAX_RETRIES = 0
    tournament, _ = one_battle_tournament()
    judge_server.script(completion("Overall, Response A is better."), rate_limited())
    run = create_judge_run(tournament=tournament, mode=JudgeRun.Mode.REFERENCE_FREE, concurrency=1)
    with pytest.raises(Exception, match="Rate limit"):
        run_judge(run=run)
    run.refresh_from_db()
    assert run.status == JudgeRun.Status.FAILED and "Rate limit" in run.error
    judge_server.script(completion("Overall, Response B is better."))
    run = run_judge(run=run)
    # The answer kept from the first attempt was paid for by this run: counted once, not cached.
    assert (run.status, run.progress, run.cached_calls, run.judgements.count()) == (
        JudgeRun.Status.DONE, "2/2", 0, 2)
    assert (run.prompt_tokens, run.completion_tokens) == (200, 100)
    assert len(judge_server.requests) == 3


# --- vision, Prometheus, Batch API ----------------------------------------------------------------


def test_vision_judge_sends_the_images_as_image_url_parts(judge_server):
    tournament, battle = one_battle_tournament(family=FamilyFactory(is_multi_image=True))
    judge_server.script(completion("2"), completion("Assistant 1"))
    run = judge(tournament, JudgeRun.Mode.VISION)
    request = judge_server.requests[0]
    (message,) = request.body["messages"]
    parts = message["content"]
    urls = [image.url for image in battle.instance.ordered_images()]
    assert [p["image_url"]["url"] for p in parts if p["type"] == "image_url"] == urls
    assert parts[0]["type"] == "text" and parts[-1]["type"] == "text"
    assert f"Assistant 1 Response: {battle.response_a.text}" in parts[-1]["text"]
    assert VISION_CRITERIA["overall"] in parts[-1]["text"]
    # "2" in ordering ab is b; "Assistant 1" in ordering ba is b too.
    assert list(judge_battles(run=run)["winner"]) == ["model_b"]


def test_vision_judge_asks_each_chirp_criterion_when_the_tournament_has_them(judge_server):
    tournament, _ = one_battle_tournament(with_criteria=True)
    judge_server.default = completion("1")
    run = judge(tournament, JudgeRun.Mode.VISION, concurrency=3)
    assert len(judge_server.requests) == 10
    assert set(run.judgements.values_list("criterion", flat=True)) == set(VISION_CRITERIA)
    assert list(judge_battles(run=run, criterion="hallucination")["winner"]) == ["tie"]


def test_vision_judge_reasoning_is_extracted_with_chirps_prompt(judge_server):
    tournament, _ = one_battle_tournament()
    judge_server.script(
        completion("Assistant 2 is more careful about the image, so I choose it."),
        completion("1"),
        completion("2"),
    )
    run = judge(tournament, JudgeRun.Mode.VISION)
    assert "output the number" in last_user_text(judge_server.requests[2])
    ab = run.judgements.get(ordering="ab")
    assert (ab.winner, ab.used_fallback) == ("b", True)


def test_prometheus_judge_scores_each_response_against_the_rubric(judge_server):
    tournament, battle = one_battle_tournament(rubric=RUBRIC)
    judge_server.script(
        completion("Feedback: Correct and specific. [RESULT] 4"),
        completion("Feedback: Misses the pants. [RESULT] 2"),
    )
    run = judge(tournament, JudgeRun.Mode.PROMETHEUS)
    request = judge_server.requests[0]
    text = request.body["messages"][0]["content"][-1]["text"]
    assert text.startswith("###Task Description:")
    assert f"###Response to evaluate:\n{battle.response_a.text}\n" in text
    assert f"###Score Rubrics:\n{RUBRIC}\n" in text
    assert request.body["messages"][0]["content"][0]["type"] == "image_url"
    (judgement,) = run.judgements.all()
    assert (judgement.score_a, judgement.score_b, judgement.winner) == (4, 2, "a")
    assert "Correct and specific." in judgement.cot
    scores = judge_rubric_scores(run=run).set_index("model")["score"].to_dict()
    assert scores == {battle.response_a.model_name: 4, battle.response_b.model_name: 2}


def test_prometheus_judge_needs_a_rubric(judge_server):
    tournament, _ = one_battle_tournament()
    with pytest.raises(AnnotationError, match="rubric"):
        create_judge_run(tournament=tournament, mode=JudgeRun.Mode.PROMETHEUS)


def test_batch_api_uploads_the_requests_and_reads_the_answers(judge_server):
    tournament, _ = one_battle_tournament()
    judge_server.script(
        completion("Overall, Response A is better."),
        completion("Overall, Response A is better.", prompt_tokens=100, completion_tokens=50),
    )
    run = judge(tournament, use_batch_api=True)
    assert len(run.batch_ids) == 1 and judge_server.batches[run.batch_ids[0]]["polls"] >= 2
    assert all(r.headers.get("x-batch") == "1" for r in judge_server.requests)
    assert JudgeCall.objects.filter(via_batch=True).count() == 2
    assert run.judgements.count() == 2
    # Half of gpt-4's price: 2 x (100 x 30 + 50 x 60) / 1e6 / 2.
    assert run.cost_usd == Decimal("0.006000")
