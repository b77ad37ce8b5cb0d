"""A gold item saved before a rule existed does not block an edit of its qualification that leaves
it alone: it is not written again, so it is not checked again. It is checked once it is changed,
and when its qualification's stage changes, at its own fields with its own reason."""

import pytest
from django.urls import reverse

from annotation.models import GoldItem, Stage, StageQualification

pytestmark = pytest.mark.django_db


def as_shown(response):
    """The POST a browser makes of an admin change page left as it was shown."""
    forms = [response.context_data["adminform"].form]
    for inline in response.context_data["inline_admin_formsets"]:
        management = inline.formset.management_form
        forms += [management, *inline.formset.forms]
    posted = {}
    for form in forms:
        for bound in form:
            value = bound.value()
            names = [bound.html_name] + ([bound.html_initial_name] if bound.field.show_hidden_initial else [])
            for name in names:
                if value is True:
                    posted[name] = "on"
                elif value is not None and value is not False:
                    posted[name] = value
    return posted


@pytest.fixture
def legacy():
    qualification = StageQualification.objects.create(stage=Stage.CAPTION, name="Captions",
                                                      description="Describe the image.")
    # Saved before answers were held to their options: nobody can answer it right.
    item = GoldItem.objects.create(qualification=qualification, content={"instruction": "Describe it."},
                                   question="Which?",
                                   options=["a", "b"], answer="c")
    return qualification, item


def test_an_edit_that_leaves_a_legacy_gold_item_alone_is_saved(admin_client, legacy):
    qualification, _ = legacy
    url = reverse("admin:annotation_stagequalification_change", args=[qualification.pk])
    posted = as_shown(admin_client.get(url))
    posted["pass_score"] = "0.9"
    response = admin_client.post(url, posted)
    assert response.status_code == 302, response.context_data["errors"]
    qualification.refresh_from_db()
    assert str(qualification.pass_score) == "0.900"


def test_a_legacy_gold_item_is_checked_once_changed_or_once_its_stage_changes(admin_client, legacy):
    qualification, item = legacy
    url = reverse("admin:annotation_stagequalification_change", args=[qualification.pk])
    posted = as_shown(admin_client.get(url))
    changed = {**posted, "gold_items-0-question": "Which one?"}
    response = admin_client.post(url, changed)
    assert response.status_code == 200 and "The answer must be one of the options" in response.content.decode()

    response = admin_client.post(url, {**posted, "stage": Stage.PAIRWISE})
    assert response.status_code == 200
    # Refused at the item, with its own reason: no verification rule is at stake on this stage.
    page = response.content.decode()
    assert "The answer must be one of the options" in page and "correct” or “incorrect" not in page
    qualification.refresh_from_db()
    assert qualification.stage == Stage.CAPTION

    # Mended in the same save, the stage moves.
    response = admin_client.post(url, {**posted, "stage": Stage.PAIRWISE, "gold_items-0-answer": "\"a\""})
    assert response.status_code == 302, response.context_data["errors"]
    qualification.refresh_from_db()
    item.refresh_from_db()
    assert (qualification.stage, item.answer) == (Stage.PAIRWISE, "a")


def test_a_qualification_moved_to_verification_keeps_its_items_verdicts_as_the_stage_spells_them(admin_client):
    """A verification stage counts a gold item's verdict as VERDICTS spell it: an item answered
    "Correct" under another stage is written "correct" when its qualification moves there, though
    the researcher changed nothing of it."""
    qualification = StageQualification.objects.create(stage=Stage.CAPTION, name="Checks", description="Check it.")
    item = GoldItem.objects.create(qualification=qualification, content={"instruction": "Is it right?"},
                                   question="Is the answer right?", options=["Correct", "Incorrect"], answer="Correct")
    url = reverse("admin:annotation_stagequalification_change", args=[qualification.pk])
    response = admin_client.post(url, {**as_shown(admin_client.get(url)), "stage": Stage.VERIFICATION})
    assert response.status_code == 302, response.context_data["errors"]
    item.refresh_from_db()
    assert item.answer == "correct"
