"""drtool: disaster-recovery backup and restore orchestrator for AI platforms on Kubernetes."""

__version__ = "0.1.0"
