"""A data generator for the manifest tests (pinned by its code and parameters)."""


def make(n: str = "3") -> bytes:
    return bytes(range(int(n)))
