"""Governance: per-process guards that watch what an agent does (behavioral health, ...)."""
