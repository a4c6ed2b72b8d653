"""Votes in: from a log record to its vote index row, once.

- `rows`: a vote record's row (the columns are `webui.db.schema.ROW_COLUMNS`) and the hygiene rules
  that say which rows count (`drop_reasons`).
- `features`: what a vote's texts say (style counts, code and long-prompt flags), counted as the vote
  is written (kept in its record) or, for a record without them, when read.
- `language`: which language a prompt is written in, offline.
- `declared`: the categories the operator declares (`--categories-file`) and which of them a vote is
  in (its rule on the first prompt, or a visitor's tag), read at board time from the vote's own line.
- `labels`: a judge's category labels (`python -m webui.judge --label-categories`), read back from
  their own files beside the logs for what no rule and no tag places.
- `ingest`: a piece of a log file to rows, pure, so that worker processes can run it.
- `index`: the vote index beside the logs (`VoteIndex`), made of the parts below.
- `tables`: the index's store, its two connections and its bookkeeping (generation, word lists).
- `catch_up`: what the logs hold beyond what was read, into the index, in order (`CatchUp`);
  `workers`: its worker processes; `cold_copy`: the columnar copy a catch-up into an empty index
  builds; `identity_checks`: rows checked again when the word list changes.
- `reading`: the rows the board and the exports read (`IndexReader`), `LOADED_COLUMNS`.
- `row_cache`: the index's rows as one numpy file, to load a million in a fraction of a second.
- `_rows`: a vote record's row, compiled, optional (setup.py); `ingest` falls back to Python.

Nothing here imports the statistics (`webui.leaderboard.stats`): a worker building rows loads no
rating code."""
