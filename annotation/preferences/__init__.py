"""Model responses and pairwise preference studies (paper §4; CHIRP Appendix C.2), as the data
flows: models' predictions are imported (predictions), battles of two responses to one instance
are sampled and launched (studies), and the crowd judges them (judgements)."""
