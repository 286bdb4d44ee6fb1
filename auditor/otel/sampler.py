"""Sampling: audit every span, export only the sampled ones."""

from __future__ import annotations

from opentelemetry.sdk.trace.sampling import AlwaysRecordSampler, Decision, SamplingResult

class AuditAllSampler(AlwaysRecordSampler):
    """The SDK's ``AlwaysRecordSampler`` that also keeps the attributes a span was started with.

    Wrap your sampler to have every span reach span processors (this one audits it) while
    exporters still get only the sampled ones. The SDK's built-in samplers return no attributes
    with a DROP decision, so the plain ``AlwaysRecordSampler`` records such spans without the
    ``ownership.*`` attributes passed to ``start_span``; this subclass puts them back.
    """

    def should_sample(self, parent_context, trace_id, name, kind=None, attributes=None, links=None,
                      trace_state=None) -> SamplingResult:
        result = self._root.should_sample(parent_context, trace_id, name, kind, attributes, links, trace_state)
        if result.decision is Decision.DROP:
            return SamplingResult(Decision.RECORD_ONLY, attributes, result.trace_state)
        return result

    def get_description(self) -> str:
        return f"AuditAllSampler{{{self._root.get_description()}}}"

