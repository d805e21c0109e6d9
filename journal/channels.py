"""How a message reaches the customer: a plain module (no model), so the tool registry, which
loads before the apps are ready, can name a customer-facing tool's channel."""

from __future__ import annotations

from django.db import models


class CustomerChannel(models.TextChoices):
    EMAIL = "email", "Email"
    CHAT = "chat", "Chat"
    SMS = "sms", "SMS"
    PHONE = "phone", "Phone"
    PORTAL = "portal", "Portal"
