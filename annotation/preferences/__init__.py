"""Model responses and pairwise tournaments (paper §4; CHIRP Appendix C.2), as the data
flows: models' predictions are imported (predictions), battles of two responses to one instance
are sampled and launched (tournaments), and the crowd judges them (judgements)."""
