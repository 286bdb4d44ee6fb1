"""The bottom layer: the evidence records (``model``), the event format's fields (``fields``),
wall-clock instants (``instants``), errors, input limits, Arrow helpers and the SQL loader.
Everything else imports from here; this package imports nothing of the auditor above it."""
