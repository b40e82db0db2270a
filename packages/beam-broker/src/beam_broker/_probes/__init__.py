"""Speculative operations on probe mirrors: run_at and handles, attempts, axioms, profile, scratch runs."""
