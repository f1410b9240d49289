"""afford.core.lock on filelock: a holder killed with SIGKILL frees the lock at once (the kernel
drops its flock), two threads of one process exclude each other, a missing folder is exit 2
before any lock file is made. (Timeouts, the sidecar's name and mode, and the holder's temp
sweep: tests/cli/test_reliability_io.py.)"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from afford.core import lock
from afford.core.errors import InputError

HOLD = ("import sys, time\nfrom afford.core.lock import locked\n"
        "with locked(sys.argv[1]):\n    print('held', flush=True)\n    time.sleep(600)\n")


def test_a_killed_holder_frees_the_lock_at_once(tmp_path):
    target = tmp_path / "h.tsv"
    p = subprocess.Popen([sys.executable, "-c", HOLD, str(target)], stdout=subprocess.PIPE,
                         text=True)
    try:
        assert p.stdout.readline().strip() == "held"
        with pytest.raises(InputError, match="being written by another"):
            with lock.locked(target, timeout_s=0.1):
                pass
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
        t0 = time.monotonic()
        with lock.locked(target, timeout_s=5.0):
            waited = time.monotonic() - t0
        assert waited < 1.0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_two_threads_of_one_process_exclude_each_other(tmp_path):
    target, inside, overlaps = tmp_path / "m.json", [], []

    def writer() -> None:
        for _ in range(20):
            with lock.locked(target):
                inside.append(1)
                if len(inside) > 1:
                    overlaps.append(len(inside))
                time.sleep(0.001)
                inside.pop()

    threads = [threading.Thread(target=writer) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert overlaps == []


def test_a_missing_folder_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        with lock.locked(tmp_path / "no" / "h.tsv"):
            pass
    assert not (tmp_path / "no").exists()
