"""Scheduled backups: backup sets from the config, run by APScheduler, pruned after each run (docs/scheduling.md).

Importing this package is cheap; APScheduler and SQLAlchemy are imported only by the modules that run jobs.
"""
