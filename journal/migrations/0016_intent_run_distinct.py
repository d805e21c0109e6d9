from django.db import migrations

# How many distinct runs journal_intent.run_id holds, as a share of its rows (a run makes about
# ten calls). ANALYZE samples 30,000 rows, and on a journal of 10,000,000 calls it guessed 81,000
# runs (123 calls each, not 10): every query reading the calls of a set of runs then chose to read
# the whole table rather than each run's calls through its index (insights' error panels, 6 s of
# sequential scan at 1,000,000 runs, bench/pages.py).
RUNS_PER_CALL = "-0.1"


class Migration(migrations.Migration):
    dependencies = [
        ("journal", "0015_picked_up_index"),
    ]

    operations = [
        migrations.RunSQL(
            f"ALTER TABLE journal_intent ALTER COLUMN run_id SET (n_distinct = {RUNS_PER_CALL}); "
            "ANALYZE journal_intent",
            "ALTER TABLE journal_intent ALTER COLUMN run_id RESET (n_distinct)",
        ),
    ]
