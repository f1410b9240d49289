"""A process the suite runs beside its tests: started in a fresh folder of its own, its
output in a log there, waited for with a deadline (stopped when it passes), stopped and its
folder removed as the session ends. The first notebook cell's certify
(:class:`tests.notebook.FirstCell`) and the second lane's pytest
(:class:`tests.second_lane.SecondLane`) are two."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path


class Beside:
    """The folder (made now) and the process (:meth:`spawn`); ``log``: its output's name."""

    def __init__(self, prefix: str, log: str) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix=prefix))
        self.log_path = self.folder / log
        self.proc: subprocess.Popen | None = None

    def spawn(self, cmd: list[str], *, env: dict[str, str], cwd: Path) -> None:
        """Start ``cmd``, stdout and stderr into the log; once (a second call does nothing)."""
        if self.proc is not None:
            return
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=log,
                                         stderr=subprocess.STDOUT)

    def wait(self, timeout: float) -> int | None:
        """Its exit code; None when it ran past ``timeout`` seconds (it is stopped then)."""
        assert self.proc is not None, "the process was never started"
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None

    def tail(self, chars: int = 3000) -> str:
        """The end of its log."""
        return self.log_path.read_text(errors="replace")[-chars:] \
            if self.log_path.is_file() else ""

    def stop(self) -> None:
        """Stop the process if it still runs, and remove its folder."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.folder, ignore_errors=True)
