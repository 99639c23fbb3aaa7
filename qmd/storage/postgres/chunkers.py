"""How each content's vectors were cut (`embedded.chunker`): `regex`, `ast`, `ast!`; for
`embed --chunk-strategy` / a collection's `chunk_strategy:`. As the SQLite backend's."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import psycopg

from qmd.storage.backend import VectorModel
from qmd.storage.postgres.connection import marks


def pending_hashes(conn: psycopg.Connection, model_id: int | None, collections: list[str], ast: Mapping[str, Sequence[str]] | None = None) -> list[tuple[str, str]]:
    if not collections:
        return []
    from qmd.storage.sqlite.vectors import wanted_ast  # the same SQL, %s for its marks

    wanted, params = wanted_ast(ast, "%s")
    sql = (
        f"SELECT h, t FROM (SELECT d.hash AS h, min(d.title) AS t, min(d.id) AS first, max(CASE WHEN {wanted} THEN 1 ELSE 0 END) AS ast"
        f" FROM documents d WHERE d.active AND d.collection IN ({marks(len(collections))}) GROUP BY d.hash) p"
        " WHERE NOT EXISTS (SELECT 1 FROM embedded e WHERE e.model_id = %s AND e.hash = p.h"
        " AND CASE WHEN p.ast = 1 THEN e.chunker IN ('ast', 'ast!') ELSE e.chunker IN ('regex', 'ast!') END)"
        " ORDER BY first"
    )
    return [(str(h), str(t)) for h, t in conn.execute(sql, (*params, *collections, -1 if model_id is None else model_id))]


def set_chunkers(conn: psycopg.Connection, model: VectorModel, chunkers: Mapping[str, str]) -> None:
    if not chunkers:
        return
    with conn.transaction(), conn.cursor() as cur:
        cur.executemany("UPDATE embedded SET chunker = %s WHERE model_id = %s AND hash = %s", [(c, model.id, h) for h, c in chunkers.items()])


def chunking_fallbacks(conn: psycopg.Connection, model_id: int | None) -> list[tuple[str, str]]:
    if model_id is None:
        return []
    sql = (
        "SELECT d.collection, d.path FROM documents d JOIN embedded e ON e.hash = d.hash AND e.model_id = %s"
        " WHERE d.active AND e.chunker = 'ast!' ORDER BY 1, 2"
    )
    return [(str(c), str(p)) for c, p in conn.execute(sql, (model_id,))]
