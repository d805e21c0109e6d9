"""What the journal tells the layers above it, without knowing them.

`escalation_opened` is sent inside the transaction that handed a run to a person, with the new
`escalation`; a receiver that acts outside the database (a notification) must wait for the
commit (transaction.on_commit), so that a rolled-back hand-over tells nobody."""

from django.dispatch import Signal

escalation_opened = Signal()
