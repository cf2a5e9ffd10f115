"""Integrations of the registry into programs that consume its decisions."""
