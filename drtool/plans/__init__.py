"""Restore plans: the schema, loading with variables, validation, and DAG execution."""
