"""What a unit's answers decide, asked again whenever they change outside a submit: a review, a
change of the stage's settings, a family settled again. Each stage says what its answers decide
(its `StageAnswers`); this names them by stage, for the places that meet every stage's units."""

from annotation.collection.captions import CAPTIONS
from annotation.collection.instructions import INSTRUCTIONS
from annotation.collection.verification import VERIFICATIONS
from annotation.models import Stage
from annotation.preferences.judgements import HUMAN_JUDGEMENTS

ANSWERS_OF_STAGE = {
    Stage.INSTRUCTION_GENERATION: INSTRUCTIONS,
    Stage.CAPTION: CAPTIONS,
    Stage.VERIFICATION: VERIFICATIONS,
    Stage.PAIRWISE: HUMAN_JUDGEMENTS,
}


def answers_of(stage):
    return ANSWERS_OF_STAGE[stage]
