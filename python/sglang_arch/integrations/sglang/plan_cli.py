def add_command(sub) -> None:
    return None
