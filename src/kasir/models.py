"""Every room's models, imported by name, so `metadata` knows all tables (Alembic, the schema tests).

A new room with a models.py adds its line here; nothing is found by name.
"""

from __future__ import annotations

from kasir.audit import models as audit_models
from kasir.bnpl import models as bnpl_models
from kasir.callbacks import models as callbacks_models
from kasir.card import models as card_models
from kasir.console import models as console_models
from kasir.db import Base
from kasir.idempotency import models as idempotency_models
from kasir.links import models as links_models
from kasir.merchants import models as merchants_models
from kasir.payments import models as payments_models
from kasir.payouts import models as payouts_models
from kasir.processors import models as processors_models
from kasir.ratelimit import models as ratelimit_models
from kasir.simulator import models as simulator_models
from kasir.snap import models as snap_models
from kasir.va import models as va_models
from kasir.wallet import models as wallet_models

MODELS = (
    merchants_models,
    callbacks_models,
    idempotency_models,
    wallet_models,
    bnpl_models,
    card_models,
    processors_models,
    audit_models,
    payments_models,
    payouts_models,
    console_models,
    ratelimit_models,
    simulator_models,
    snap_models,
    va_models,
    links_models,
)

metadata = Base.metadata
