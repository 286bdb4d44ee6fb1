"""Stage 4, detect: graded findings and diagnostics from the events (SPEC sections 3, 7 and 8).

``batch`` is the set-based detector over the store (SQL); ``live`` the incremental one the
OpenTelemetry door feeds one event at a time; ``lease`` measures lease health in both ways. One
rule table (``tests/rules/test_rules.py``) and one lease table (``tests/detect/test_lease_engines.py``) pin
the engines to each other."""
