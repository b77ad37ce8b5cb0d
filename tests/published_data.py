"""The files the VisIT-Bench authors published, as the tests read them (tests/paths.py says where)."""

import csv
import io

from tests.paths import VISIT_BENCH as DATA

MULTI = DATA / "visit_bench_multi_images.csv"
SINGLE = DATA / "visit_bench_single_image.csv"
ANNOTATED = DATA / "visit_fully_annotated_example.csv"
PREDICTIONS = DATA / "predictions_llamaadapter-v2.csv"
SHEETS = (MULTI, SINGLE, ANNOTATED)


def _records(text):
    """The file's records, each as the raw text it was written in (its line end included)."""
    lines = io.StringIO(text, newline="").readlines()
    reader = csv.reader(iter(lines))
    records, start = [], 0
    for _ in reader:
        records.append("".join(lines[start:reader.line_num]))
        start = reader.line_num
    return records


def benchmark_part(path):
    """The published file as a snapshot gives it back: every record as written, less the rows its
    authors rated incorrect without giving a reference, which are not in the benchmark."""
    text = path.read_bytes().decode("utf-8")
    header, *rows = _records(text)
    names = next(csv.reader([header]))
    if "human_ratings_gpt4_correct" not in names:
        return text
    correct, reference = names.index("human_ratings_gpt4_correct"), names.index("reference_output")
    kept = []
    for record in rows:
        cells = next(csv.reader(io.StringIO(record, newline="")))
        if cells[correct].strip().lower() in ("true", "1") or cells[reference].strip():
            kept.append(record)
    part = header + "".join(kept)
    return part if text.endswith(("\n", "\r")) else part.rstrip("\r\n")
