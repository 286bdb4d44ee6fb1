"""Stage 5, explain: findings grouped into incidents with witnesses (``incidents``), and the
audit's result as plain data (``result``), narrowed by a scope (``scope``) or compared with
expected findings (``expect``)."""
