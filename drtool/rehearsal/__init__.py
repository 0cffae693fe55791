"""Rehearsals: restore a plan into a fresh target with the source unreachable, timed against its objectives."""
