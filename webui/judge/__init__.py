"""An LLM judge: any model the arena serves, asked which of a battle's two replies is better.

- `prompt`: the prompt file (ours, or the operator's) and the strict parsing of a verdict.
- `records`: verdicts as JSON Lines of their own beside the vote logs, durable and resumable.
- `run`: a judging run over the logged battles, both orders, as wide as the judge's slots.
- `__main__`: `python -m webui.judge LOGDIR --judge NAME`.

docs/judge.md explains the method and how far a judge can be trusted.
"""
