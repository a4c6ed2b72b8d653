"""deploy/local_tier.py's PostgreSQL as the drill uses it (deploy/tier_drill.py): FOLDER/tier.json
carries what stopping and starting the database takes, and a database stopped hard from those
fields (pg_ctl stop -m immediate) refuses connections, then starts again with its data."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import psycopg
import pytest

from deploy.local_tier import Postgres, Tier, start_postgres


def test_the_drill_stops_the_tiers_database_hard_and_starts_it_again() -> None:
    # a folder of /tmp's own, as local_tier's default: as root the database runs as `postgres`,
    # which cannot enter pytest's (root-only) temporary folders
    folder = Path(tempfile.mkdtemp(prefix="arena-tier-test-"))
    tier = Tier(folder)
    try:
        url = start_postgres(tier)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE TABLE votes (id int)")
            conn.execute("INSERT INTO votes VALUES (1)")
        tier.describe()
        postgres = Postgres(**json.loads((folder / "tier.json").read_text())["postgres"])
        postgres.stop(mode="immediate")
        with pytest.raises(psycopg.OperationalError):
            psycopg.connect(url, connect_timeout=2)
        postgres.start()
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT id FROM votes").fetchall() == [(1,)]
    finally:
        tier.stop()
        shutil.rmtree(folder, ignore_errors=True)
