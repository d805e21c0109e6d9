import django.contrib.postgres.indexes
import django.db.models.functions.text
from django.contrib.postgres.operations import TrigramExtension
from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("journal", "0005_unknown_outcome_index"),
    ]

    operations = [
        TrigramExtension(),
        migrations.AddIndex(
            model_name="run",
            index=django.contrib.postgres.indexes.GinIndex(
                django.contrib.postgres.indexes.OpClass(
                    django.db.models.functions.text.Upper("ticket_id"), name="gin_trgm_ops"
                ),
                name="run_ticket_trgm_idx",
            ),
        ),
        migrations.AddIndex(
            model_name="run",
            index=django.contrib.postgres.indexes.GinIndex(
                django.contrib.postgres.indexes.OpClass(
                    django.db.models.functions.text.Upper("order_id"), name="gin_trgm_ops"
                ),
                name="run_order_trgm_idx",
            ),
        ),
    ]
