"""An LLM judge: any model the arena serves, asked which of a battle's two replies is better.

- `prompt`: the prompt file (ours, or the operator's) and the strict parsing of a verdict.
- `records`: verdicts as JSON Lines of their own beside the vote logs, durable and resumable.
- `run`: a judging run over the logged battles, both orders, as wide as the judge's slots.
- `label_prompt`, `labels`, `label_cli`: the declared category (or none) of each battle no rule and
  no visitor's tag places, asked of the judge, kept as label records beside the logs.
- `__main__`: `python -m webui.judge LOGDIR --judge NAME` (`--label-categories`: labels instead).

docs/judge.md explains the method and how far a judge can be trusted.
"""
