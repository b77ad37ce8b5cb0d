"""The files the VisIT-Bench authors published, as the tests read them (tests/paths.py says where)."""

from tests.paths import VISIT_BENCH as DATA

MULTI = DATA / "visit_bench_multi_images.csv"
SINGLE = DATA / "visit_bench_single_image.csv"
ANNOTATED = DATA / "visit_fully_annotated_example.csv"
PREDICTIONS = DATA / "predictions_llamaadapter-v2.csv"
SHEETS = (MULTI, SINGLE, ANNOTATED)
