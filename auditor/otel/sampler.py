"""Sampling: audit every span, export only the sampled ones, whatever the parent's sampled flag.

``AuditAllSampler`` must be the outermost sampler: ``ParentBased`` sends a span whose remote
parent was not sampled (``traceparent ...-00``) to its ``ALWAYS_OFF`` delegate, never to its root,
so an audit sampler placed inside it never runs. The factories below are the SDK's
``opentelemetry_traces_sampler`` entry points (declared in pyproject.toml), selected with
``OTEL_TRACES_SAMPLER`` by the SDK's configurator (``opentelemetry-instrument``, the distro);
``OTEL_TRACES_SAMPLER_ARG`` is the ratio where there is one.
"""

from __future__ import annotations

from opentelemetry.sdk.trace.sampling import (ALWAYS_ON, AlwaysRecordSampler, Decision, ParentBased,
                                              ParentBasedTraceIdRatio, Sampler, SamplingResult, TraceIdRatioBased)

__all__ = ["AuditAllSampler", "parentbased_always_on", "parentbased_traceidratio", "traceidratio"]


class AuditAllSampler(AlwaysRecordSampler):
    """The SDK's ``AlwaysRecordSampler`` that also keeps the attributes a span was started with.

    Wrap your sampler (outermost) to have every span reach span processors (this one audits it)
    while exporters still get only the sampled ones. The SDK's built-in samplers return no
    attributes with a DROP decision, so the plain ``AlwaysRecordSampler`` records such spans
    without the ``ownership.*`` attributes passed to ``start_span``; this subclass puts them back.
    """

    def should_sample(self, parent_context, trace_id, name, kind=None, attributes=None, links=None,
                      trace_state=None) -> SamplingResult:
        result = self._root.should_sample(parent_context, trace_id, name, kind, attributes, links, trace_state)
        if result.decision is Decision.DROP:
            return SamplingResult(Decision.RECORD_ONLY, attributes, result.trace_state)
        return result

    def get_description(self) -> str:
        return f"AuditAllSampler{{{self._root.get_description()}}}"


def _rate(arg: str) -> float:
    """``OTEL_TRACES_SAMPLER_ARG`` as the SDK reads it: a ratio, 1.0 when absent or not a number."""
    try:
        rate = float(arg)
    except (TypeError, ValueError):
        return 1.0
    return rate if 0.0 <= rate <= 1.0 else 1.0


def parentbased_always_on(arg: str = "") -> Sampler:
    """``OTEL_TRACES_SAMPLER=audit_parentbased_always_on``: the SDK's default, audited."""
    return AuditAllSampler(ParentBased(ALWAYS_ON))


def parentbased_traceidratio(arg: str = "") -> Sampler:
    """``OTEL_TRACES_SAMPLER=audit_parentbased_traceidratio``, ``OTEL_TRACES_SAMPLER_ARG=0.1``."""
    return AuditAllSampler(ParentBasedTraceIdRatio(_rate(arg)))


def traceidratio(arg: str = "") -> Sampler:
    """``OTEL_TRACES_SAMPLER=audit_traceidratio``, ``OTEL_TRACES_SAMPLER_ARG=0.1``."""
    return AuditAllSampler(TraceIdRatioBased(_rate(arg)))
