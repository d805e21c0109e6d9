from django.apps import AppConfig


class InsightsConfig(AppConfig):
    """The insights page for team leads and admins: what escalates, why, how long people take,
    what compensations cost; each figure one aggregate query over the journal's and the audit
    trail's rows, drawn as a chart, a table and a CSV from the same numbers."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "insights"
    verbose_name = "Insights"
