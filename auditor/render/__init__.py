"""Stage 6, render: the JSON document, the terminal summary and the HTML report, all from one
``AuditResult``. Renderers only format; they never decide what is a finding."""
