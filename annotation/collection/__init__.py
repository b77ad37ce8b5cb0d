"""Collecting the benchmark, stage by stage as the data flows (paper §2.1, Fig. 3): workers write
instructions for images (instructions, with uploads), instruction-conditioned captions (captions);
a model or a researcher gives a candidate reference (references); workers verify it
(verification, with the worker-model job). What every item waits for is in waiting; progress, the
paper's Table 2 among it, is read in progress. Launching a stage, its work units, the queue and the
one submit every stage goes through are crowd work's (annotation/crowdwork/)."""
