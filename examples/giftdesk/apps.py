from django.apps import AppConfig


class GiftdeskConfig(AppConfig):
    """The giftdesk as a Django app: installing it is what turns its plug-ins on (seam.py)."""

    name = "examples.giftdesk"
    label = "giftdesk"
    verbose_name = "Giftdesk (an example integration)"
