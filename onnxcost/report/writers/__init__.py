"""Writers: each takes a ``report.tables.Table`` and returns it in one format."""
