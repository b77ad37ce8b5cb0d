"""One entry per crowd stage: what its page shows, and how its answer is read and stored.

A new stage page adds an entry to PAGES with a template extending annotator/stage_page.html; entry
points, tokens, drafts, the timer, keyboard shortcuts and submission are shared and need no change.
Each page reads its answer with one form, for a unit and for a gold item alike; a page that can show
a gold item as one of its own tasks (live gold items, paper §2.2 kept current) says which part of
the answer is compared with the gold item's.
"""



from annotation.models import Stage
from frontend.collection_pages import (
    CaptionForm,
    InstructionForm,
    VerificationForm,
    caption_context,
    caption_material,
    instruction_context,
    instruction_material,
    store_caption,
    store_instruction,
    store_verification,
    verification_context,
    verification_gold_answer,
    verification_material,
)
from frontend.page_parts import StagePage
from frontend.pairwise_page import (
    PairwiseForm,
    pairwise_context,
    pairwise_gold_answer,
    pairwise_material,
    store_pairwise,
)

PAGES = {
    page.stage: page
    for page in (
        StagePage(
            stage=Stage.INSTRUCTION_GENERATION,
            template="annotator/instruction_generation.html",
            heading="Write a new instruction",
            material=instruction_material,
            form=InstructionForm,
            context=instruction_context,
            store=store_instruction,
            shortcuts=(("Ctrl+Enter", "submit"),),
        ),
        StagePage(
            stage=Stage.CAPTION,
            template="annotator/caption.html",
            heading="Describe the image for the instruction",
            material=caption_material,
            form=CaptionForm,
            context=caption_context,
            store=store_caption,
            shortcuts=(("Ctrl+Enter", "submit"),),
        ),
        StagePage(
            stage=Stage.VERIFICATION,
            template="annotator/verification.html",
            heading="Check the response",
            material=verification_material,
            form=VerificationForm,
            context=verification_context,
            store=store_verification,
            shortcuts=(
                ("1", "correct"), ("2", "incorrect"),
                ("3 / 4 / 5", "problem in caption / response / both"),
                ("6", "harmful content on / off"), ("Enter", "submit"),
            ),
            gold_answer=verification_gold_answer,
        ),
        StagePage(
            stage=Stage.PAIRWISE,
            template="annotator/pairwise.html",
            heading="Compare two responses",
            material=pairwise_material,
            form=PairwiseForm,
            context=pairwise_context,
            store=store_pairwise,
            shortcuts=(
                # A tournament's score rubrics name their keys (1 to 5) beside their own question.
                ("1 / 2", "assistant 1 / assistant 2, then the next question"), ("Tab", "move between questions"),
                ("Enter", "submit"),
            ),
            gold_answer=pairwise_gold_answer,
            layout="wide",
        ),
    )
}
