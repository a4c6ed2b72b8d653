"""The About tab: what the app is, what is recorded, and the terms of use."""

from __future__ import annotations

from typing import TYPE_CHECKING

import gradio as gr

if TYPE_CHECKING:
    from webui.services import Services

ABOUT = """\
## About Pairwise Arena

Pairwise Arena lets you chat with language models and compare them. In a **Battle**, two models
drawn at random answer your prompt side by side without their names; you vote for the better
answer (or a tie, or both bad), and only then are the names revealed. The votes build the
**Leaderboard**. **Side by side** lets you pick two to four models yourself, and **Direct chat**
talks to one model.

Each pane has its own parameters (temperature, top_p, top_k, max_new_tokens, repetition penalty,
seed, system prompt). **Stop** (or Esc) stops every pane at once; **Regenerate** asks again. In a
battle, both models get one length cap, and what only tells the models apart (token counts, speeds,
their own settings) is shown after the vote.

### What is recorded

Your conversations, your votes and the parameters you used are recorded on this server, together
with the model names. Your network address is kept {ip_note}. The records may be used to compute the
leaderboard and may be shared for research. Do not enter personal or confidential information.

### Terms of use

The models here are small research models. They can produce text that is wrong, offensive or
unsafe; their answers are not advice. You agree not to use this service for anything illegal,
harmful or deceptive, and not to try to extract the model names before voting. By using the
service you agree that your conversations and votes are recorded as described above.

### Limits

A message may be up to {max_chars:,} characters long, and a conversation up to {max_turns} turns;
after that, start a new round.
"""

IP_NOTES = {"hash": "only as a keyed hash", "raw": "as is", "none": "not at all"}


def build_about_tab(services: Services) -> None:
    settings = services.settings
    ip_note = IP_NOTES.get(getattr(settings, "ip_logging", "hash"), "as configured by the operator")
    gr.Markdown(
        ABOUT.format(ip_note=ip_note, max_chars=settings.max_input_chars, max_turns=settings.max_turns),
        elem_id="about-text",
    )
