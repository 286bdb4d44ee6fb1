"""The store's SQL (``store.sql``), shared by the modules that run it."""

from __future__ import annotations

from ..core.sql import statements

SQL = statements("store/store.sql")
