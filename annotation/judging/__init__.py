"""LLM judges of battles (paper §4, Appendix F): prompts, parsing, calls and the runner."""
