"""The error panels' rollup (insights.error_counts): its rows and its fold's row. The first fold
(the beat task, or `manage.py insights --fold`) backfills it; until then the page counts live."""


import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("journal", "0016_intent_run_distinct"),
    ]

    operations = [
        migrations.CreateModel(
            name="ErrorFold",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("counted_before", models.DateTimeField(blank=True, null=True)),
                ("last_event_id", models.BigIntegerField(default=0)),
                ("folded_at", models.DateTimeField(blank=True, null=True)),
            ],
        ),
        migrations.CreateModel(
            name="ErrorCount",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("hour", models.DateTimeField(help_text="The start of the UTC hour the runs started in.")),
                ("task_type", models.SlugField(max_length=64)),
                (
                    "grain",
                    models.CharField(
                        choices=[
                            ("run", "Per task type"),
                            ("tool", "Per tool"),
                            ("class", "Per error class"),
                            ("tool_class", "Per tool and error class"),
                        ],
                        max_length=10,
                    ),
                ),
                ("tool", models.CharField(blank=True, max_length=200)),
                ("error_class", models.CharField(blank=True, max_length=40)),
                ("runs", models.PositiveIntegerField(default=0)),
                ("calls", models.PositiveIntegerField(default=0)),
                ("failed", models.PositiveIntegerField(default=0)),
                ("loops", models.PositiveIntegerField(default=0)),
                ("retries", models.PositiveIntegerField(default=0)),
                ("repairs", models.PositiveIntegerField(default=0)),
                ("replans", models.PositiveIntegerField(default=0)),
                ("reflections", models.PositiveIntegerField(default=0)),
                ("escalations", models.PositiveIntegerField(default=0)),
                (
                    "tenant",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="+", to="journal.tenant"
                    ),
                ),
            ],
            options={
                "indexes": [models.Index(fields=["hour"], name="insights_error_count_hour_idx")],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("tenant", "grain", "hour", "task_type", "tool", "error_class"),
                        name="insights_error_count_key",
                    )
                ],
            },
        ),
    ]
