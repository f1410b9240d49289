"""Which checkpoint files to keep: the newest ``keep`` step files of the folder, counted over
every file of the callback's naming, also those that killed sessions left, and never the one
the resume marker names.

Why the whole folder: a framework that counts only the files it wrote itself (Lightning's
``save_top_k`` keeps the newest k of the files its restored state lists) never deletes what a
killed session wrote after its last confirmed save; a killed lineage's files stay forever,
and a step written twice gets a second name (``step=20-v1.ckpt``). With ``keep=2`` one
campaign of kills left five 84 MB step files and ``last.ckpt``, while the plan's disk figure
(:mod:`afford.planning.disk`, after COSTS 3.4: live copies x checkpoint bytes) assumes two.

The newest are the last *written* (modification time; the step, then the version break a tie),
not the highest step: files a killed session wrote past the marker's save are older than any
the resumed lineage writes, so they leave first once the lineage has saved ``keep`` times.
The marker's file is kept whatever its age (it is the next session's resume point), and so is
the file the framework resumed from.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path

from afford.core.errors import InputError

PLACEHOLDER = re.compile(r"\{([^{}:]+)(?::[^{}]*)?\}")


@dataclass(frozen=True)
class StepFile:
    path: str
    step: int
    version: int  # 0 for the first file of a step; k for Lightning's "-vk" copies
    written_ns: int  # modification time, ns


def step_file_pattern(template: str, *, names_inserted: bool = True, join: str = "-",
                      extension: str = ".ckpt") -> re.Pattern[str]:
    """The names Lightning's ``ModelCheckpoint`` gives step files for ``filename=template``
    (``"{step}"`` -> ``step=15.ckpt``, ``step=15-v1.ckpt``), as a pattern with groups
    ``step`` and ``version``; InputError when the template does not name the step once."""
    parts, at, steps = [], 0, 0
    for m in PLACEHOLDER.finditer(template):
        name = m.group(1)
        parts.append(re.escape(template[at:m.start()]))
        label = re.escape(name + "=") if names_inserted else ""
        if name == "step":
            steps += 1
            parts.append(label + r"(?P<step>\d+)")
        else:
            parts.append(label + r".+?")
        at = m.end()
    if steps != 1:
        raise InputError(f"filename={template!r}: name the step once ('{{step}}'): the "
                         "callback keeps the newest files by their step")
    parts.append(re.escape(template[at:]))
    return re.compile("".join(parts) + rf"(?:{re.escape(join)}v(?P<version>\d+))?"
                      + re.escape(extension))


def step_files(folder: str | os.PathLike, pattern: re.Pattern[str]) -> list[StepFile]:
    """The step files in ``folder`` (none when it does not exist)."""
    out = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return []
    for e in entries:
        m = pattern.fullmatch(e.name)
        if m is None or not e.is_file():
            continue
        try:
            written = e.stat().st_mtime_ns
        except OSError:  # deleted meanwhile
            continue
        out.append(StepFile(e.path, int(m.group("step")), int(m.group("version") or 0),
                            written))
    return out


def surplus(files: Collection[StepFile], keep: int, protected: Collection[str | None]
            ) -> list[StepFile]:
    """The files beyond the newest ``keep`` (by write time, then step, then version), less
    the ``protected`` paths (the marker's file, the file resumed from)."""
    if keep < 1:
        raise ValueError(f"keep={keep}: at least 1")
    safe = {_same(p) for p in protected if p}
    newest = sorted(files, key=lambda f: (f.written_ns, f.step, f.version), reverse=True)
    return [f for f in newest[keep:] if _same(f.path) not in safe]


def prune(folder: str | os.PathLike, pattern: re.Pattern[str], keep: int,
          protected: Collection[str | None],
          remove: Callable[[str], None] = os.remove) -> list[str]:
    """Delete the surplus step files of ``folder``; the paths deleted. A file that cannot be
    deleted (gone already, no permission) is left, not raised: the next save tries again."""
    gone = []
    for f in surplus(step_files(folder, pattern), keep, protected):
        try:
            remove(f.path)
        except OSError:
            continue
        gone.append(f.path)
    return gone


def _same(path: str) -> str:
    return os.path.normcase(str(Path(path).resolve()))
