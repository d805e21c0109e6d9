"""Who acts, and the journal event each accepted change leaves behind. Below journal.services
and journal.transitions, which both write events through event_record (or event_insert, when
they hold ids rather than rows) in the transaction of the change the event records."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .models import ActorKind, Intent, JournalEvent, Run


@dataclass(frozen=True)
class Actor:
    """Who made a change: an agent runtime (named by its token), the system (a worker), or a
    person (a staff user). Every journal event carries one."""

    kind: str
    name: str
    user_id: int | None = None

    @classmethod
    def agent(cls, name: str) -> Actor:
        return cls(kind=ActorKind.AGENT, name=name)

    @classmethod
    def system(cls, name: str) -> Actor:
        return cls(kind=ActorKind.SYSTEM, name=name)

    @classmethod
    def user(cls, user: Any) -> Actor:
        return cls(kind=ActorKind.USER, name=user.get_username(), user_id=user.pk)


@dataclass(frozen=True, slots=True)
class Caller:
    """An agent token as an earlier request of it about one run found them: the token's digest
    and name, its tenant's slug and the run's policy version (the key's inputs beside the call's
    own). Kept between requests so that the next call about the run needs no read: the journal's
    statement asserts every part of it (journal.sql.INSERT_INTENT_AS_CALLER), so a caller that is
    no longer so (a revoked or renamed token, another run) writes nothing."""

    digest: str
    token_name: str
    key_namespace: str
    run_pk: uuid.UUID
    policy_version: str
    # The run's created_at: which month's partitions its rows lie in (journal.partitions).
    run_created_at: datetime

    @property
    def actor(self) -> Actor:
        return Actor.agent(self.token_name)


def event_record(
    *,
    run: Run,
    kind: str,
    actor: Actor,
    at: datetime,
    intent: Intent | None = None,
    data: dict[str, Any] | None = None,
) -> JournalEvent:
    return event_insert(
        run_id=run.pk,
        run_created_at=run.created_at,
        intent_id=intent.pk if intent else None,
        kind=kind,
        actor=actor,
        at=at,
        data=data,
    )


def event_insert(
    *,
    run_id: Any,
    run_created_at: datetime,
    intent_id: int | None,
    kind: str,
    actor: Actor,
    at: datetime,
    data: dict[str, Any] | None,
) -> JournalEvent:
    """event_record for a caller that holds ids, not rows (the journal's hot writes)."""
    event = event_of(
        run_id=run_id,
        run_created_at=run_created_at,
        intent_id=intent_id,
        kind=kind,
        actor=actor,
        at=at,
        data=data,
    )
    event.save(force_insert=True)
    return event


def event_of(
    *,
    run_id: Any,
    run_created_at: datetime,
    intent_id: int | None,
    kind: str,
    actor: Actor,
    at: datetime,
    data: dict[str, Any] | None,
) -> JournalEvent:
    """The event, not yet written: for a caller that writes many in one INSERT (bulk_create).
    `run_created_at`, the run's, is the partition it lies in."""
    return JournalEvent(
        run_id=run_id,
        run_created_at=run_created_at,
        intent_id=intent_id,
        kind=kind,
        actor_kind=actor.kind,
        actor_name=actor.name,
        user_id=actor.user_id,
        data=data or {},
        at=at,
    )
