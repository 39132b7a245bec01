"""Processors: what actually moves money, behind one interface per kind of money mover.

The seam points one way: products import it, it imports no product. A processor answers with
data (a CardDecision, Notifications: what happened to which reference); the product that owns
the payment applies it. Products declare what they offer (channels, notification appliers,
processor calls) at start-up (offers.py; kasir.products declares them).

protocols.py    CardAcquirer, WalletIssuer, BnplLender, Processor, Notification, DeclineReason (the seam)
offers.py       Offer: what a product declares; declare(), offer_of()
registry.py     KASIR_PROCESSORS, plug-ins by entry point (`kasir.processors`), switched-off products
calls.py        a processor asked outside any unit of work: hold, ask, record (and the worker's finish)
service.py      a Notification handed to its product's applier, in one unit of work
endpoints.py    POST /processors/{name}/notify

The staging simulator is a plug-in like any other, outside this package (kasir.simulator).
"""
