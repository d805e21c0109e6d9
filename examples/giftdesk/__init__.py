"""Giftdesk: a gift-card and loyalty desk integrated with Seam from the outside (docs/integrating.md).

The desk's provider (`examples.giftdesk.provider`) is a standalone HTTP server keeping its own
state in a JSON file. It has three endpoints the agent changes:

- gift-card loads, which take an idempotency key and can be looked up by it;
- loyalty points, which ignore keys and can only be searched by the business reference, each
  record carrying the time it was made (so the engine can tell the run's entry from an older one);
- customer emails, keyed, and irreversible once sent.

The Seam side is a Django app (`apps.py`) with one module, `seam.py`, declaring its tools,
catalogue entries, policies and flow (with the ticket the kill harness replays). Installing the
app (INSTALLED_APPS, or SEAM_APPS=examples.giftdesk in the environment) is what turns them on."""
