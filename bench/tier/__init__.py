"""Several servers: what the tier of docs/deploy.md costs.

relay.py         tokens relayed by one server and by two behind nginx, models elsewhere and fast
shared_board.py  storing the shared board in the database
vote_store.py    the vote index on SQLite and on PostgreSQL, side by side
"""
