"""Statistics: pure functions of tables (pandas/numpy in, tables and numbers out), no I/O, no threads.

- `ratings`: the table: ratings with intervals and ranks, Elo beside them, each model's record.
- `battle_codes`: battles as numbers (models as indices, scores), grouped outcomes, counts per model
  and pair, win fractions.
- `bradley_terry`: the Bradley-Terry fit, its ratings, bootstrap and likelihood-ratio intervals.
- `elo`: online Elo. `scale`: the rating scale every fit reports on.
- `style`: Bradley-Terry with the replies' style held equal (style control) and its sandwich intervals.
- `confidence`: how sure the board is of each neighbouring pair, and which battles would settle it.
- `categories`: the category masks (language, multi-turn, long prompt, coding, the declared ones'
  columns) over a battles table.
- `shrink`: a category's board (built-in or declared) shrunk toward the overall one, with a stated normal prior.
- `fingerprints`: a name that came to serve something else, rated apart.
- `voters`: the daily cap and the voters who disagree with everyone beyond chance.
- `history`: ratings over time.
- `speed`: each model's median time to first token and tokens/s.
- `_elo`: the online Elo, compiled, optional (setup.py).

Nothing here imports the votes room (`webui.leaderboard.votes`): the features arrive as columns."""
