"""A deployment's own Django app, as an operator installs it with SEAM_APPS (used by
test_production_settings: production declares the tools of the apps the environment installs,
and only those)."""
