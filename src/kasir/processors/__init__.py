"""Processors: what actually moves money, behind one interface per kind of money mover.

protocols.py    CardAcquirer, WalletIssuer, BnplLender, Processor, Notification (the seam)
registry.py     KASIR_PROCESSORS, entry points (`kasir.processors`), switched-off products
service.py      a Notification applied by the product service, in one unit of work
endpoints.py    POST /processors/{name}/notify
simulator/      the staging simulator: test cards, 3-D Secure OTP page, dummy payment,
                wallet checkout page, BNPL approval page (never in production)
"""
