"""LLM judges of battles (paper §4 and Appendix F; CHIRP C.2.3; Prometheus-Vision F.2).

Text judges read the instruction-conditioned caption instead of the image, with the paper's
reference-free (Fig. 16) or reference-backed (Fig. 17) prompt, in both orderings of every battle;
an answer not in the asked format goes to the extraction prompt (Fig. 18), and a battle's winner
is the response that won more of its two orderings, else a tie (VisIT-Bench README). The vision
judge sends the images themselves (CHIRP's GPT-4V set-up); the Prometheus judge scores each
response 1-5 against a rubric.

`prompts` builds the requests, `calls` answers them (cached, concurrently or by batch),
`parsing` reads the answers, `progress` says what a run has left, `runner` takes a run from
creation to its end.
"""
