"""Placeholder replaced below."""


def add_command(sub) -> None:
    return None
