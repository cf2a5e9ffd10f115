def register() -> None:
    return None
