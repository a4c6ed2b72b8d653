"""Where the arena keeps shared state: an SQLite file or a PostgreSQL database behind one `Store`
(`store`), and its tables as numbered migrations, the vote index's columns among them (`schema`).
Used by the leaderboard's vote index and board, and by the rate limits several servers share."""
