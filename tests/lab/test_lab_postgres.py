"""The lab's PostgreSQL: it starts from the machine's binaries, serves SQL on loopback and stops cleanly.

The catalog tests rely on it, and it has the trickiest start of the lab (root in CI, a dropped-privilege
server, data outside root's folders), so it gets checks of its own.
"""

from __future__ import annotations

import time
from pathlib import Path

import psycopg2
import pytest
import sqlalchemy as sa
from drtool_lab.components.postgres import PostgresServer
from drtool_lab.lab import Lab

pytestmark = pytest.mark.postgres


def test_sqlalchemy_round_trip_in_a_fresh_database(postgres: PostgresServer, postgres_url: str) -> None:
    engine = sa.create_engine(postgres_url)
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE backups (id text PRIMARY KEY, size bigint)"))
        conn.execute(sa.text("INSERT INTO backups VALUES ('b1', 42)"))
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT size FROM backups WHERE id = 'b1'")).scalar_one() == 42
        assert conn.execute(sa.text("SELECT version()")).scalar_one().startswith("PostgreSQL ")
    engine.dispose()


def test_listens_on_loopback_only_and_exports_its_url(postgres: PostgresServer) -> None:
    url = postgres.env()["DRTOOL_TEST_POSTGRES_URL"]
    assert url == postgres.url() and url.startswith("postgresql+psycopg2://")
    conn = psycopg2.connect(host="127.0.0.1", port=postgres.port, user=postgres.db_user, dbname=postgres.db_user)
    try:
        cur = conn.cursor()
        cur.execute("SHOW listen_addresses")
        assert cur.fetchone() == ("127.0.0.1",)
    finally:
        conn.close()


def test_stops_promptly_with_a_client_connected_and_restarts_with_its_data(lab_root: Path) -> None:
    lab = Lab("pg-lifecycle", root=lab_root)
    lab.up(["postgres"])
    server = lab["postgres"]
    assert isinstance(server, PostgresServer)
    try:
        server.create_database("kept")
        idle = psycopg2.connect(host="127.0.0.1", port=server.port, user=server.db_user, dbname="kept")
        started = time.monotonic()
        lab.down(purge=False)
        assert time.monotonic() - started < 10  # fast shutdown, not a wait for the idle client
        assert not server.running()
        idle.close()

        lab = Lab.load("pg-lifecycle", root=lab_root)
        lab.up(["postgres"])
        restarted = lab["postgres"]
        assert isinstance(restarted, PostgresServer) and restarted.port == server.port
        with sa.create_engine(restarted.url("kept")).connect() as conn:
            assert conn.execute(sa.text("SELECT current_database()")).scalar_one() == "kept"
    finally:
        for component in lab.components.values():
            if isinstance(component, PostgresServer):
                component.purge()
        lab.down()
    assert not Path(server.run_dir).exists()
