"""A month's partitions leave the journal in two steps instead of one DROP.

`seam_journal_month_drop` dropped both partitions in one transaction. DROP TABLE on a partition
holds an ACCESS EXCLUSIVE lock on its parent until commit, and PostgreSQL frees the dropped files
at commit, before it releases its locks: every read through `journal_intent` or
`journal_journalevent` (the console, the sweep) and every run created (the intent partition's
foreign key locks `journal_run`) waited for the filesystem to free the month's files. That is
about 0.9 s for a month of 250,000 runs on the 2-core machine, and grows with the month.

- `seam_journal_month_detach(month)` refuses while any run of the month is not archived, as the
  drop did; otherwise it detaches both partitions, drops their foreign keys (a later DROP of a
  table with a foreign key locks the table it references) and renames them
  `<partition>_detached`, so that no statement naming the partition reaches them. Catalog changes
  only: milliseconds, whatever the month's size.
- `seam_journal_month_discard(month)` drops the month's two detached tables, in a transaction of
  its own. It locks only them.

Self-contained: the SQL is written out here, not imported."""

from django.db import migrations

DETACH_AND_DISCARD = r"""
CREATE OR REPLACE FUNCTION seam_journal_month_detach(first_day date) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
    month record;
    unarchived bigint;
    parent text;
    leaf text;
    foreign_key record;
    detached boolean := false;
BEGIN
    SELECT * INTO month FROM seam_journal_month_bounds(first_day);
    SELECT count(*) INTO unarchived FROM journal_run
    WHERE created_at >= month.starts AND created_at < month.ends AND archived_at IS NULL;
    IF unarchived > 0 THEN
        RAISE EXCEPTION 'journal month % still has % runs not archived', month.suffix, unarchived
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    FOREACH parent IN ARRAY ARRAY['journal_intent', 'journal_journalevent'] LOOP
        leaf := parent || '_' || month.suffix;
        IF to_regclass(leaf) IS NOT NULL THEN
            EXECUTE format('ALTER TABLE %I DETACH PARTITION %I', parent, leaf);
            FOR foreign_key IN
                SELECT conname FROM pg_constraint WHERE conrelid = leaf::regclass AND contype = 'f'
            LOOP
                EXECUTE format('ALTER TABLE %I DROP CONSTRAINT %I', leaf, foreign_key.conname);
            END LOOP;
            EXECUTE format('ALTER TABLE %I RENAME TO %I', leaf, leaf || '_detached');
            detached := true;
        END IF;
    END LOOP;
    RETURN detached;
END $$;

CREATE OR REPLACE FUNCTION seam_journal_month_discard(first_day date) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
    month record;
    leaf text;
    discarded boolean := false;
BEGIN
    SELECT * INTO month FROM seam_journal_month_bounds(first_day);
    FOREACH leaf IN ARRAY ARRAY['journal_intent_' || month.suffix || '_detached',
                                'journal_journalevent_' || month.suffix || '_detached'] LOOP
        IF to_regclass(leaf) IS NOT NULL THEN
            EXECUTE format('DROP TABLE %I', leaf);
            discarded := true;
        END IF;
    END LOOP;
    RETURN discarded;
END $$;

REVOKE EXECUTE ON FUNCTION seam_journal_month_detach(date), seam_journal_month_discard(date) FROM PUBLIC;
DROP FUNCTION IF EXISTS seam_journal_month_drop(date);
"""

# As journal 0021 made it.
DROP_IN_ONE = r"""
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

REVOKE EXECUTE ON FUNCTION seam_journal_month_drop(date) FROM PUBLIC;
DROP FUNCTION IF EXISTS seam_journal_month_detach(date);
DROP FUNCTION IF EXISTS seam_journal_month_discard(date);
"""


class Migration(migrations.Migration):
    dependencies = [
        ("journal", "0022_run_unarchived_index"),
    ]

    operations = [migrations.RunSQL(DETACH_AND_DISCARD, DROP_IN_ONE)]
