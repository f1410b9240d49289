"""A fork server for tools/mutation.py: one per workspace, it imports pytest and the heavy
third-party packages the tests use once, then runs each pytest invocation it is sent in a
forked child, so a mutant costs its tests, not three seconds of interpreter and imports.

    python3 tools/mutation_worker.py WORKSPACE

Reads one JSON list of pytest arguments per line on stdin and answers one line per request:
the child's exit status, or ``timeout`` (the child killed) past the deadline in the request's
first element. afford itself is never imported here: each child imports the workspace's
(mutated) copy afresh.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

PRELOAD = ("numpy", "scipy.optimize", "scipy.stats", "pydantic", "hypothesis", "pytest", "rich",
           "typer", "torch")


def run(root: str, args: list[str], timeout: float) -> str:
    pid = os.fork()
    if pid == 0:  # the child: run pytest on the workspace, exit with its status
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            os.dup2(devnull, 2)
            os.chdir(root)
            src = os.path.join(root, "src")
            sys.path.insert(0, src)
            os.environ["PYTHONPATH"] = src
            import pytest

            code = int(pytest.main(args))
        except BaseException:  # noqa: BLE001 (anything in the child is a failed run)
            code = 99
        os._exit(code)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return str(os.waitstatus_to_exitcode(status))
        time.sleep(0.02)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return "timeout"


def main() -> int:
    root = sys.argv[1]
    os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
    sys.dont_write_bytecode = True
    for name in PRELOAD:
        try:
            __import__(name)
        except ImportError:
            pass
    print("ready", flush=True)
    for line in sys.stdin:
        timeout, *args = json.loads(line)
        print(run(root, args, float(timeout)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
