"""How long each worker model takes to fit, at 100,000 and 1,000,000 answers (issue 41).

    .venv/bin/python benchmarks/worker_model_times.py                      # no database
    .venv/bin/python benchmarks/worker_model_times.py --answers 10000 100000 --budget 300

Each label model the verification stage offers (crowd-kit's Dawid-Skene, GLAD, MACE) is fitted by
`annotation.worker_models.fit_labels`, the function the worker-model job calls, on a frame of
simulated verification answers (three per reference, one worker per 333 answers, 20% spammers:
`quality_models.label_frame`, seed 26); the pairwise models by `fit_pairwise` on as many judgements
of 15 models. Every fit runs a fixed number of iterations over every answer, so its time grows in
proportion to the answers: a size whose projected time (from the size before it) passes
`--budget` seconds is not run but extrapolated, and printed as such. The last column is what the
admin's estimate reads (`worker_models.FIT_SECONDS_PER_100K`).
"""

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.quality_models import label_frame  # noqa: E402

LABEL_MODELS = ("dawid_skene", "glad", "mace")
PAIRWISE_MODELS = ("bradley_terry", "noisy_bt")
SEED = 26
ANSWERS_PER_WORKER = 333


def pairwise_frame(rng, answers, workers, models=15):
    import pandas as pd

    strength = rng.normal(0, 1, models)
    left, right = rng.integers(0, models, answers), rng.integers(0, models - 1, answers)
    right = np.where(right >= left, right + 1, right)
    chose_left = rng.random(answers) < 1 / (1 + np.exp(strength[right] - strength[left]))
    names = np.array([f"model-{index:02d}" for index in range(models)])
    return pd.DataFrame({"worker": rng.integers(0, workers, answers), "left": names[left],
                         "right": names[right], "label": np.where(chose_left, names[left], names[right])})


def frame_for(model, answers):
    rng = np.random.default_rng(SEED)
    workers = max(answers // ANSWERS_PER_WORKER, 10)
    if model in PAIRWISE_MODELS:
        return pairwise_frame(rng, answers, workers)
    return label_frame(rng, answers=answers, workers=workers, spammer_share=0.2)[0]


def fit(model, frame):
    from annotation import worker_models

    if model in PAIRWISE_MODELS:
        return worker_models.fit_pairwise(frame, model)
    return worker_models.fit_labels(frame, model)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--answers", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--budget", type=float, default=900.0,
                        help="seconds a single fit may be expected to take before it is extrapolated instead")
    parser.add_argument("--models", nargs="+", default=[*LABEL_MODELS, *PAIRWISE_MODELS])
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "crowdbench.settings")
    import django

    django.setup()
    print(f"seed {SEED}; one worker per {ANSWERS_PER_WORKER} answers; 20% spammers (label models); "
          f"budget {args.budget:.0f} s a fit", flush=True)
    print(f"{'model':<14} {'answers':>10} {'seconds':>10}  {'':<14} {'s per 100,000':>14}", flush=True)
    for model in args.models:
        rate = None
        for answers in sorted(args.answers):
            if rate is not None and rate * answers > args.budget:
                print(f"{model:<14} {answers:>10,} {rate * answers:>10.0f}  {'extrapolated':<14} "
                      f"{rate * 100_000:>14.1f}", flush=True)
                continue
            frame = frame_for(model, answers)
            started = time.perf_counter()
            fit(model, frame)
            seconds = time.perf_counter() - started
            rate = seconds / answers
            print(f"{model:<14} {answers:>10,} {seconds:>10.1f}  {'measured':<14} {rate * 100_000:>14.1f}",
                  flush=True)


if __name__ == "__main__":
    main()
