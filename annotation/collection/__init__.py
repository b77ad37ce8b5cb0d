"""Collecting the benchmark, stage by stage as the data flows (paper §2.1, Fig. 3): a family's
stages are launched and their work units made (stages); workers write instructions for images
(instructions, with uploads), instruction-conditioned captions (captions); a model or a researcher
gives a candidate reference (references); workers verify it (verification). Progress, the paper's
Table 2 among it, is read in progress."""
