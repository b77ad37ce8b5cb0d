"""The VisIT-Bench pipeline as data (paper §2.1, Fig. 3; §4), one module per part of the flow.

An instruction family is curated by researchers from images (families); crowd workers (workers)
lease work units of a stage (work) to write instances (instances) and, from those,
instruction-conditioned captions, candidate references from a model and their verifications
(collection). Model responses to verified instances meet in battles that the crowd judges
(preferences) and LLM judges judge (judging); judgements are scored (scoring) and frozen into
datasets (datasets).

Modules import only those earlier in the flow: workers, families, instances, work, collection,
preferences, endpoints, judging, scoring, datasets, then the rules of who may work
(workforce) and the research groups that own families, tournaments and snapshots (teams). A field
pointing later in the flow names its model by a string, so no two modules import each other.
"""

from annotation.models.collection import (
    Caption,
    DecisionChange,
    InstructionSubmission,
    Reference,
    Table2Count,
    Verification,
    WorkflowCount,
)
from annotation.models.datasets import ImportedRow, ImportedSheet, Snapshot
from annotation.models.endpoints import EndpointCall, ModelEndpoint
from annotation.models.families import ImageAsset, InstructionFamily, SeedImage
from annotation.models.instances import Instance, InstanceImage, multi_image_q
from annotation.models.judging import JudgeCall, JudgeJudgement, JudgeRun
from annotation.models.preferences import (
    CHIRP_CRITERIA,
    REFERENCE_MODEL_NAME,
    Battle,
    HumanJudgement,
    ModelResponse,
    Rubric,
    Side,
    Tournament,
)
from annotation.models.scoring import LeaderboardResult
from annotation.models.teams import Membership, ResearchGroup
from annotation.models.work import (
    Aggregation,
    Answer,
    Assignment,
    AssignmentQuerySet,
    Stage,
    StageConfig,
    WorkState,
    WorkUnit,
    counted_verifications,
    counted_work,
    unreviewed_answers,
)
from annotation.models.worker_models import LabelShare, WorkerModel, WorkerReliability
from annotation.models.workers import Worker
from annotation.models.workforce import (
    GoldAnswer,
    GoldItem,
    QualificationAttempt,
    StageQualification,
    WorkerBlock,
    WorkerQualification,
)

__all__ = [
    "Membership",
    "ResearchGroup",
    "Aggregation",
    "Answer",
    "WorkerModel",
    "WorkerReliability",
    "LabelShare",
    "GoldAnswer",
    "GoldItem",
    "QualificationAttempt",
    "StageQualification",
    "WorkerBlock",
    "WorkerQualification",
    "CHIRP_CRITERIA",
    "REFERENCE_MODEL_NAME",
    "Assignment",
    "AssignmentQuerySet",
    "Battle",
    "Caption",
    "DecisionChange",
    "EndpointCall",
    "HumanJudgement",
    "ImageAsset",
    "ImportedRow",
    "ImportedSheet",
    "Instance",
    "InstanceImage",
    "InstructionFamily",
    "InstructionSubmission",
    "JudgeCall",
    "JudgeRun",
    "JudgeJudgement",
    "LeaderboardResult",
    "ModelEndpoint",
    "ModelResponse",
    "Tournament",
    "Reference",
    "Table2Count",
    "WorkflowCount",
    "Rubric",
    "SeedImage",
    "Side",
    "Snapshot",
    "Stage",
    "StageConfig",
    "Verification",
    "WorkState",
    "WorkUnit",
    "Worker",
    "counted_verifications",
    "counted_work",
    "unreviewed_answers",
    "multi_image_q",
]
