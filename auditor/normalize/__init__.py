"""Stage 2, normalize: one record to the canonical fields or a quarantine reason. ``reference``
is the normalizer every line the store's SQL fast path cannot take goes through (and the live
door's); ``vocabulary`` is a team's ``--map`` overlay on the format's own names."""
