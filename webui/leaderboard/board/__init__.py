"""The board: what the Leaderboard tab and the command line show, built from the votes and the stats.

- `build`: a board (`Board`) from the index's rows, the logs or a battles table, with its filters.
- `tally`: the board carried forward vote by vote between full builds.
- `live`: the live board, rebuilt off the request path as votes arrive.
- `lease`: one server builds the board among several sharing a database, the others read it.
- `codec`: a board as bytes and back, for that sharing (data, never pickle).
- `view`: the board the tab shows, kept current, and what each of the tab's controls asks of it.
- `display`: the board's tables formatted for people.
- `plots`: the figures; `export`: battles and preference pairs as files."""
