"""Lease health (SPEC section 7): ``batch`` over a store (``health.sql``), ``live`` per event
for the span processor's metrics; the shared definitions are in ``rules.lease``."""
