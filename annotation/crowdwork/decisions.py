"""What a unit's answers decide, asked again whenever they change outside a submit: a review, a
change of the stage's settings, a family settled again. Each stage says what its answers decide
(its `StageAnswers`); this names them by stage, for the places that meet every stage's units."""

from annotation.collection.captions import CAPTIONS
from annotation.collection.instructions import INSTRUCTIONS
from annotation.collection.verification import VERIFICATIONS
from annotation.crowdwork.answers import settle_unit
from annotation.models import Stage
from annotation.preferences.judgements import HUMAN_JUDGEMENTS

ANSWERS_OF_STAGE = {
    Stage.INSTRUCTION_GENERATION: INSTRUCTIONS,
    Stage.CAPTION: CAPTIONS,
    Stage.VERIFICATION: VERIFICATIONS,
    Stage.PAIRWISE: HUMAN_JUDGEMENTS,
}


def settle_again(unit):
    """Ask a unit's answers again what they decide, as its stage says (answers.settle_unit);
    returns (closed, decided)."""
    return settle_unit(unit, ANSWERS_OF_STAGE[unit.stage])
