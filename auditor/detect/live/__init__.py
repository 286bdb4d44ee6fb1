"""Stage 4, detect, one event at a time: the live detector (``detector``), its event tuple
(``event``) and its authority adapter (``authority``)."""
