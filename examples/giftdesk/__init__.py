"""Giftdesk: a gift-card and loyalty desk integrated with Seam from the outside (docs/integrating.md).

The desk's provider (`examples.giftdesk.provider`) is a standalone HTTP server keeping its own
state in a JSON file. It has three endpoints the agent changes:

- gift-card loads, which take an idempotency key and can be looked up by it;
- loyalty points, which ignore keys and can only be searched by the business reference, each
  record carrying the time it was made (so the engine can tell the run's entry from an older one);
- customer emails, keyed, and irreversible once sent.

The Seam side is four small modules, each listed in one setting: `tools` (SEAM_TOOL_MODULES),
`catalogue` (SEAM_CATALOGUE_MODULES), `policies` (SEAM_POLICY_MODULES) and `flows`
(SEAM_FLOW_MODULES, which also scripts the ticket the kill harness replays)."""
