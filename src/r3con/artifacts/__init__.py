"""A run's folder: the files a run writes as it goes, and its records as tables (CSV, Parquet, DuckDB)."""
