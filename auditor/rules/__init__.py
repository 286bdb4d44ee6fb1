"""The rules of SPEC sections 3 and 8 that are not set operations: stated once, engine-free,
imported by both detectors and every renderer.

The batch detector (``detect.batch``: SQL, then ``explain``) and the incremental one
(``detect.live``, the span processor's) decide staleness and double commits each in its own way
(joins over a table, a state machine over a stream); everything they must then agree on word for
word lives here: what each grade means and asks for (``grades``), the stable ids (``ids``), which
epoch an incident is about, how a resolved (or unresolved) attempt is graded, confidence and the
document's order (``findings``), the mandates (``authority``) and the lease rules (``lease``).
tests/rules/test_rules.py runs one table of histories against both engines.
"""

from __future__ import annotations

from .findings import (TWICE, attempt_grade, confidence, diagnostic_order, displaced_epoch, finding_order,
                       resolved_as, resolves)
from .grades import GRADES, MEANINGS, RESPONSES, GradeSpec
from .ids import authority_incident_id, diagnostic_id, finding_id, incident_id, stable_id

__all__ = ["TWICE", "attempt_grade", "confidence", "diagnostic_order", "displaced_epoch", "finding_order",
           "resolved_as", "resolves", "GRADES", "MEANINGS", "RESPONSES", "GradeSpec", "authority_incident_id",
           "diagnostic_id", "finding_id", "incident_id", "stable_id"]
