"""`schema_for`: one PostgreSQL schema per index name and per project config, never shared
(pure: no server needed)."""

from __future__ import annotations

import itertools

import pytest

from qmd.backends.postgres.connection import legacy_schema, schema_for

NAMES = [
    "index", "work", "work_notes", "work-notes", "Work_Notes", "WORK-NOTES", "work.notes", "work__notes",
    "a5b4dbfb59ac", "x_a5b4dbfb59ac", "work_notes_2e62c8c0b604", "p_proj_0123456789ab", "0", "9lives",
    "n" * 58, "n" * 59, "n" * 64, "N" * 64, "a-" * 32, "a." * 32,
]
PROJECTS = ["/home/alice/src/payments-service/.qmd/index.yml", "/home/bob/src/payments-service/.qmd/index.yml", "/p/.qmd/index.yml", "/p/.qmd/index.yaml", "/" + "deep/" * 40 + ".qmd/index.yml"]
BASES = ["qmd", "team", "team_knowledge_base_shared_schema_x1", "t_" + "0" * 16, "s" * 63]


@pytest.mark.parametrize("base", BASES)
def test_no_two_indexes_share_a_schema_and_each_is_a_valid_name(base: str) -> None:
    schemas = {("index", n): schema_for(n, base=base) for n in NAMES} | {("project", p): schema_for("index", project=p, base=base) for p in PROJECTS}
    clashes = [(a, b) for (a, sa), (b, sb) in itertools.combinations(schemas.items(), 2) if sa == sb]
    assert not clashes
    for schema in schemas.values():
        assert 0 < len(schema.encode()) <= 63 and schema.replace("_", "").isalnum() and schema == schema.lower()


def test_plain_names_keep_the_schema_qmd_always_gave_them() -> None:
    for name in ("index", "work", "work_notes", "0", "9lives"):
        assert schema_for(name) == legacy_schema(name) == f"qmd_{name}"
    assert schema_for("work-notes") != legacy_schema("work-notes") == "qmd_work_notes"
    assert schema_for("a5b4dbfb59ac").startswith("qmd_a5b4dbfb59ac_")  # a bare 12-hex name is hashed too
