from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    # Online: runs are created meanwhile.
    atomic = False

    dependencies = [
        ("journal", "0021_partitioned_history"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="run",
            index=models.Index(
                condition=models.Q(("archived_at__isnull", True)), fields=["created_at"], name="run_unarchived_idx"
            ),
        ),
    ]
