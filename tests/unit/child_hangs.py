"""A module child (run by winml_perf.ep.child) that never finishes: for timeout tests."""

import time


def main(argv: list[str]) -> int:
    time.sleep(3600)
    return 0
