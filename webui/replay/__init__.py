"""Replay: the team's own logged prompts, answered again by a new checkpoint and the model it would
replace, judged in both orders (webui.judge), as a report.

- `prompts`: which logged prompts to replay (first user turns of counted battles, de-duplicated,
  drawn across categories, prompts that people decided first).
- `run`: both replies through the arena's own engines, as many at once as the models' slots, then
  the judge; the report's figures (a paired win rate with its interval, per category).
- `__main__`: `python -m webui.replay LOGDIR --model NEW --baseline OLD --prompts N`.
"""
