"""One entry per crowd stage: what its page shows, and how its answer is read and stored.

A new stage page adds an entry to PAGES with a template extending annotator/stage_page.html; entry
points, tokens, drafts, the timer, keyboard shortcuts and submission are shared and need no change.
A page that can show a gold item as one of its own tasks (live gold items, paper §2.2 kept current)
also says how to build its context from a gold item and how to read the answer to compare.
"""



from annotation.models import Stage
from frontend.collection_pages import (
    caption_context,
    instruction_context,
    post_caption,
    post_instruction,
    post_verification,
    verification_context,
    verification_gold_answer,
    verification_gold_context,
)
from frontend.page_parts import StagePage
from frontend.pairwise_page import pairwise_context, pairwise_gold_answer, pairwise_gold_context, post_pairwise

PAGES = {
    page.stage: page
    for page in (
        StagePage(
            stage=Stage.INSTRUCTION_GENERATION,
            template="annotator/instruction_generation.html",
            heading="Write a new instruction",
            context=instruction_context,
            submit=post_instruction,
            shortcuts=(("Ctrl+Enter", "submit"),),
        ),
        StagePage(
            stage=Stage.CAPTION,
            template="annotator/caption.html",
            heading="Describe the image for the instruction",
            context=caption_context,
            submit=post_caption,
            shortcuts=(("Ctrl+Enter", "submit"),),
        ),
        StagePage(
            stage=Stage.VERIFICATION,
            template="annotator/verification.html",
            heading="Check the response",
            context=verification_context,
            submit=post_verification,
            shortcuts=(
                ("1", "correct"), ("2", "incorrect"),
                ("3 / 4 / 5", "problem in caption / response / both"),
                ("6", "harmful content on / off"), ("Enter", "submit"),
            ),
            gold_context=verification_gold_context,
            gold_answer=verification_gold_answer,
        ),
        StagePage(
            stage=Stage.PAIRWISE,
            template="annotator/pairwise.html",
            heading="Compare two responses",
            context=pairwise_context,
            submit=post_pairwise,
            shortcuts=(
                ("1 / 2", "assistant 1 / assistant 2, then the next question"),
                ("1 – 5", "a score, then the next"), ("Tab", "move between questions"),
                ("Enter", "submit"),
            ),
            gold_context=pairwise_gold_context,
            gold_answer=pairwise_gold_answer,
            layout="wide",
        ),
    )
}
