"""The intent and journal-event tables partitioned by their run's creation month.

A maintenance window (docs/scaling.md, "Moving the existing rows"): run it with the web, the
workers and beat stopped. In one transaction it renames the plain tables aside, makes the
partitioned ones under their names (one partition per month from the oldest run's to two
months ahead, and a default partition for a row of any other month), copies every row with its
id and its run's created_at, builds the keys and indexes (each unique key widened by the
partition column, PostgreSQL's rule), the events' triggers and the sequences, and drops the
plain tables. Also the two functions that make and drop a month's partitions, owned by the
tables' owner so that beat, as the application's role, can call them (journal.partitions).

Self-contained: the SQL is written out here, not imported, so the migration means tomorrow what
it means today."""

from django.db import migrations, models

# --- the month functions ------------------------------------------------------------------------

MONTH_FUNCTIONS = r"""
CREATE OR REPLACE FUNCTION seam_journal_month_bounds(first_day date, OUT suffix text,
        OUT starts timestamptz, OUT ends timestamptz)
LANGUAGE sql IMMUTABLE AS $$
    SELECT to_char(first_day, 'YYYY_MM'),
           date_trunc('month', first_day::timestamp) AT TIME ZONE 'UTC',
           (date_trunc('month', first_day::timestamp) + interval '1 month') AT TIME ZONE 'UTC'
$$;

-- A partition's indexes named after their parent's, with the partition's suffix
-- (intent_open_idx_2026_12): a plan then says which index it reads.
CREATE OR REPLACE FUNCTION seam_journal_partition_indexes_named(leaf text, suffix text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
    named record;
BEGIN
    FOR named IN
        SELECT child.relname AS now_named, parent.relname || '_' || suffix AS to_be
        FROM pg_index JOIN pg_class AS child ON child.oid = pg_index.indexrelid
        JOIN pg_inherits ON pg_inherits.inhrelid = child.oid
        JOIN pg_class AS parent ON parent.oid = pg_inherits.inhparent
        WHERE pg_index.indrelid = leaf::regclass AND child.relname <> parent.relname || '_' || suffix
    LOOP
        EXECUTE format('ALTER INDEX %I RENAME TO %I', named.now_named, named.to_be);
    END LOOP;
END $$;

-- A month's two partitions, idempotently: the intent's and the event's, the events' truncate
-- guard (a statement trigger on the parent fires only for the parent), the planner's estimate
-- of runs per intent, and the parents' grants (a statement that names a partition is checked
-- against the partition's own privileges).
CREATE OR REPLACE FUNCTION seam_journal_month_create(first_day date) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
    month record;
    parent text;
    leaf text;
    granted record;
    created boolean := false;
BEGIN
    SELECT * INTO month FROM seam_journal_month_bounds(first_day);
    FOREACH parent IN ARRAY ARRAY['journal_intent', 'journal_journalevent'] LOOP
        leaf := parent || '_' || month.suffix;
        IF to_regclass(leaf) IS NULL THEN
            EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (%L) TO (%L)',
                           leaf, parent, month.starts, month.ends);
            created := true;
        END IF;
        PERFORM seam_journal_partition_indexes_named(leaf, month.suffix);
        FOR granted IN
            SELECT pg_get_userbyid(acl.grantee) AS grantee, string_agg(acl.privilege_type, ', ') AS privileges
            FROM pg_class AS class, aclexplode(class.relacl) AS acl
            WHERE class.oid = parent::regclass AND acl.grantee <> class.relowner AND acl.grantee <> 0
            GROUP BY acl.grantee
        LOOP
            EXECUTE format('GRANT %s ON TABLE %I TO %I', granted.privileges, leaf, granted.grantee);
        END LOOP;
    END LOOP;
    EXECUTE format('ALTER TABLE %I ALTER COLUMN run_id SET (n_distinct = -0.1)', 'journal_intent_' || month.suffix);
    EXECUTE format('CREATE OR REPLACE TRIGGER journal_journalevent_no_truncate BEFORE TRUNCATE ON %I '
                   'FOR EACH STATEMENT EXECUTE FUNCTION seam_refuse_journal_change()',
                   'journal_journalevent_' || month.suffix);
    RETURN created;
END $$;

-- A month's two partitions dropped, once every run created in it is archived (the retention
-- job's verified archive holds its rows). Refuses otherwise: no run loses its rows unarchived.
CREATE OR REPLACE FUNCTION seam_journal_month_drop(first_day date) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
    month record;
    unarchived bigint;
BEGIN
    SELECT * INTO month FROM seam_journal_month_bounds(first_day);
    SELECT count(*) INTO unarchived FROM journal_run
    WHERE created_at >= month.starts AND created_at < month.ends AND archived_at IS NULL;
    IF unarchived > 0 THEN
        RAISE EXCEPTION 'journal month % still has % runs not archived', month.suffix, unarchived
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    IF to_regclass('journal_intent_' || month.suffix) IS NULL
            AND to_regclass('journal_journalevent_' || month.suffix) IS NULL THEN
        RETURN false;
    END IF;
    EXECUTE format('DROP TABLE IF EXISTS %I, %I',
                   'journal_intent_' || month.suffix, 'journal_journalevent_' || month.suffix);
    RETURN true;
END $$;
"""

# A refusal names the table people know: a partition's parent, not the partition.
REFUSE_JOURNAL_CHANGE = """
CREATE OR REPLACE FUNCTION seam_refuse_journal_change() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION '% is append-only: % refused',
        COALESCE((SELECT inhparent::regclass::text FROM pg_inherits WHERE inhrelid = TG_RELID), TG_TABLE_NAME),
        TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$ LANGUAGE plpgsql;
"""

# As journal 0008 wrote it.
REFUSE_JOURNAL_CHANGE_BEFORE = """
CREATE OR REPLACE FUNCTION seam_refuse_journal_change() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION '% is append-only: % refused', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$ LANGUAGE plpgsql;
"""

# Nobody but the owner and the roles it grants (seam_db_roles: the application's) may call them.
MONTH_FUNCTIONS += """
REVOKE EXECUTE ON FUNCTION seam_journal_month_create(date), seam_journal_month_drop(date) FROM PUBLIC;
"""

DROP_MONTH_FUNCTIONS = """
DROP FUNCTION IF EXISTS seam_journal_month_drop(date);
DROP FUNCTION IF EXISTS seam_journal_month_create(date);
DROP FUNCTION IF EXISTS seam_journal_month_bounds(date);
DROP FUNCTION IF EXISTS seam_journal_partition_indexes_named(text, text);
"""

# --- both directions: the plain table aside, the new one under its name, the rows copied --------

# Index and key names are schema-wide, so the table set aside gives up its own (its check
# constraints stay: their names are the table's).
SET_ASIDE = r"""
ALTER TABLE {table} RENAME TO {table}_aside;
DO $$ DECLARE item record; BEGIN
    FOR item IN SELECT conname FROM pg_constraint
                WHERE conrelid = '{table}_aside'::regclass AND contype IN ('p', 'u') LOOP
        EXECUTE format('ALTER TABLE {table}_aside DROP CONSTRAINT %I', item.conname);
    END LOOP;
    FOR item IN SELECT indexrelid::regclass AS name FROM pg_index WHERE indrelid = '{table}_aside'::regclass LOOP
        EXECUTE format('DROP INDEX %s', item.name);
    END LOOP;
END $$;
"""

INTENT_KEYS = """
ALTER TABLE journal_intent ADD CONSTRAINT intent_key_unique UNIQUE (idempotency_key{extra});
ALTER TABLE journal_intent ADD CONSTRAINT intent_step_per_run UNIQUE (run_id, step_id{extra});
CREATE INDEX intent_failed_idx ON journal_intent (run_id, tool) WHERE status = 'failed';
CREATE INDEX intent_open_idx ON journal_intent (intended_at) WHERE status = 'intended';
CREATE INDEX intent_run_order_idx ON journal_intent (run_id, intended_at, id);
CREATE INDEX intent_unknown_idx ON journal_intent (run_id) WHERE status = 'unknown';
ALTER TABLE journal_intent ADD CONSTRAINT journal_intent_run_id_fk_journal_run_id
    FOREIGN KEY (run_id) REFERENCES journal_run (id) DEFERRABLE INITIALLY DEFERRED;
ALTER TABLE journal_intent ALTER COLUMN run_id SET (n_distinct = -0.1);
"""

EVENT_KEYS = """
CREATE INDEX journal_run_at_idx ON journal_journalevent (run_id, at);
CREATE INDEX journal_run_newest_idx ON journal_journalevent (run_id, id);
CREATE INDEX journal_user_idx ON journal_journalevent (user_id) WHERE user_id IS NOT NULL;
CREATE INDEX journal_unknown_outcome_idx ON journal_journalevent (at)
    WHERE data -> 'status' = '"unknown"'::jsonb AND kind = 'intent_reconciled';
CREATE INDEX journal_picked_up_idx ON journal_journalevent (at) INCLUDE (run_id, intent_id, kind)
    WHERE kind IN ('intent_reconciled', 'run_resumed', 'run_escalated');
ALTER TABLE journal_journalevent ADD CONSTRAINT journal_journalevent_user_id_fk_auth_user_id
    FOREIGN KEY (user_id) REFERENCES auth_user (id) DEFERRABLE INITIALLY DEFERRED;
CREATE TRIGGER journal_journalevent_append_only BEFORE UPDATE OR DELETE ON journal_journalevent
    FOR EACH ROW EXECUTE FUNCTION seam_refuse_journal_change();
-- OR REPLACE: on a new database audit 0004, which declares it first on older journals, may run
-- after this migration.
CREATE OR REPLACE TRIGGER journal_journalevent_no_truncate BEFORE TRUNCATE ON journal_journalevent
    FOR EACH STATEMENT EXECUTE FUNCTION seam_refuse_journal_change();
"""

# The partitions: a month each from the oldest run's to two months ahead, and a default one.
MONTHS = """
CREATE TABLE journal_intent_default PARTITION OF journal_intent DEFAULT;
CREATE TABLE journal_journalevent_default PARTITION OF journal_journalevent DEFAULT;
CREATE TRIGGER journal_journalevent_no_truncate BEFORE TRUNCATE ON journal_journalevent_default
    FOR EACH STATEMENT EXECUTE FUNCTION seam_refuse_journal_change();
SELECT seam_journal_month_create(month::date)
FROM generate_series(
    date_trunc('month', LEAST((SELECT min(created_at) FROM journal_run), now()) AT TIME ZONE 'UTC'),
    date_trunc('month', now() AT TIME ZONE 'UTC') + interval '2 months',
    interval '1 month') AS month;
"""

# Once the parents have their indexes (built after the copy), every partition's are named.
NAME_INDEXES = """
SELECT seam_journal_partition_indexes_named(leaf, suffix)
FROM (VALUES ('journal_intent_default', 'default'), ('journal_journalevent_default', 'default')) AS leaves (leaf, suffix);
SELECT seam_journal_month_create(month) FROM (
    SELECT to_date(right(child.relname, 7), 'YYYY_MM') AS month
    FROM pg_inherits JOIN pg_class AS child ON child.oid = pg_inherits.inhrelid
    WHERE pg_inherits.inhparent = 'journal_intent'::regclass AND child.relname ~ '_[0-9]{4}_[0-9]{2}$'
) AS months;
"""


def _copy(table: str, sequence: str) -> str:
    """`table`'s rows, ids kept, from the table set aside; its sequence carried on from the old
    one's position, and owned by the new id column."""
    return f"""
INSERT INTO {table} SELECT copied.*, COALESCE(run.created_at, copied.{"intended_at" if table == "journal_intent" else "at"})
FROM {table}_aside AS copied LEFT JOIN journal_run AS run ON run.id = copied.run_id;
CREATE SEQUENCE {table}_id_seq AS bigint OWNED BY {table}.id;
SELECT setval('{table}_id_seq', GREATEST(
    (SELECT last_value FROM {sequence}), (SELECT COALESCE(max(id), 0) FROM {table}), 1));
ALTER TABLE {table} ALTER COLUMN id SET DEFAULT nextval('{table}_id_seq');
"""  # noqa: S608 - names only, no values


def _partition(table: str, sequence: str) -> str:
    return (
        SET_ASIDE.format(table=table)
        + f"""
CREATE TABLE {table} (LIKE {table}_aside INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING STORAGE,
                      run_created_at timestamptz NOT NULL)
    PARTITION BY RANGE (run_created_at);
ALTER TABLE {table} ALTER COLUMN id DROP DEFAULT;
"""
    )


FORWARD = (
    "LOCK TABLE journal_run IN SHARE MODE;\n"
    + REFUSE_JOURNAL_CHANGE
    + MONTH_FUNCTIONS
    + _partition("journal_intent", "handover_intent_id_seq")
    + _partition("journal_journalevent", "handover_journalevent_id_seq")
    + MONTHS
    + _copy("journal_intent", "handover_intent_id_seq")
    + _copy("journal_journalevent", "handover_journalevent_id_seq")
    + "ALTER TABLE journal_intent ADD PRIMARY KEY (id, run_created_at);\n"
    + "ALTER TABLE journal_journalevent ADD PRIMARY KEY (id, run_created_at);\n"
    + INTENT_KEYS.format(extra=", run_created_at")
    + EVENT_KEYS
    + NAME_INDEXES
    + "DROP TABLE journal_intent_aside, journal_journalevent_aside;\n"
    + "ANALYZE journal_intent, journal_journalevent;\n"
)


def _unpartition(table: str, sequence: str) -> str:
    """The way back: a plain table with its identity column, every row but the partition
    column."""
    return (
        SET_ASIDE.format(table=table)
        + f"""
CREATE TABLE {table} (LIKE {table}_aside INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING STORAGE);
ALTER TABLE {table} DROP COLUMN run_created_at;
ALTER TABLE {table} ALTER COLUMN id DROP DEFAULT;
ALTER TABLE {table} ALTER COLUMN id ADD GENERATED BY DEFAULT AS IDENTITY (SEQUENCE NAME {sequence});
DO $$ DECLARE columns text; BEGIN
    SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum) INTO columns FROM pg_attribute
    WHERE attrelid = '{table}'::regclass AND attnum > 0 AND NOT attisdropped;
    EXECUTE format('INSERT INTO {table} (%s) OVERRIDING SYSTEM VALUE SELECT %s FROM {table}_aside', columns, columns);
END $$;
SELECT setval('{sequence}', GREATEST((SELECT last_value FROM {table}_aside_id_seq),
                                     (SELECT COALESCE(max(id), 0) FROM {table}), 1));
ALTER TABLE {table} ADD CONSTRAINT {sequence.removesuffix("_id_seq")}_pkey PRIMARY KEY (id);
"""  # noqa: S608 - names only
    )


BACKWARD = (
    "ALTER SEQUENCE journal_intent_id_seq RENAME TO journal_intent_aside_id_seq;\n"
    "ALTER SEQUENCE journal_journalevent_id_seq RENAME TO journal_journalevent_aside_id_seq;\n"
    + _unpartition("journal_intent", "handover_intent_id_seq")
    + _unpartition("journal_journalevent", "handover_journalevent_id_seq")
    + INTENT_KEYS.format(extra="")
    + EVENT_KEYS
    + "DROP TABLE journal_intent_aside, journal_journalevent_aside;\n"
    + DROP_MONTH_FUNCTIONS
    + REFUSE_JOURNAL_CHANGE_BEFORE
)


class Migration(migrations.Migration):
    dependencies = [
        ("journal", "0020_retention_fields"),
        ("compensations", "0012_intents_without_constraints"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunSQL(FORWARD, BACKWARD)],
            state_operations=[
                migrations.AddField(
                    model_name="intent",
                    name="run_created_at",
                    field=models.DateTimeField(editable=False),
                    preserve_default=False,
                ),
                migrations.AddField(
                    model_name="journalevent",
                    name="run_created_at",
                    field=models.DateTimeField(editable=False),
                    preserve_default=False,
                ),
                migrations.RemoveConstraint(model_name="intent", name="intent_step_per_run"),
                migrations.RemoveConstraint(model_name="intent", name="intent_key_unique"),
                migrations.AddConstraint(
                    model_name="intent",
                    constraint=models.UniqueConstraint(
                        fields=("run", "step_id", "run_created_at"), name="intent_step_per_run"
                    ),
                ),
                migrations.AddConstraint(
                    model_name="intent",
                    constraint=models.UniqueConstraint(
                        fields=("idempotency_key", "run_created_at"), name="intent_key_unique"
                    ),
                ),
            ],
        )
    ]
