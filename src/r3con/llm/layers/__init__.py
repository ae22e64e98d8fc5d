"""The layers stacked around the LLM seam, each one small wrapper adding one concern.

Top to bottom as `r3con.llm.build_llm` stacks them: `shaped` (the request as it will be sent),
`calllog` (calls.jsonl), `accounting` (usage and cost per stage, progress), `nearwindow` (prompts close to
an unreported window), `answered` (replies given before: the cache, an earlier run, a resumed folder's
`replay`), `output` (checks on every reply), `retry`, `overflow` ("too long" replies), `limits` (rate and
concurrency), `budget` (`--max-cost`).
"""
