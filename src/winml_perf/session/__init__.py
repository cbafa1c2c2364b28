"""Runtime sessions: what the runner measures through."""
