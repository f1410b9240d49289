"""Which checkpoint files the Lightning callback keeps (afford.track.retention): the names of
its step files, the newest ``keep`` by write time over the whole folder, never a protected
file (the marker's, the one resumed from)."""

from __future__ import annotations

import os

import pytest

from afford.core.errors import InputError
from afford.track.retention import StepFile, prune, step_file_pattern, step_files, surplus


@pytest.mark.parametrize("template, names, other", [
    ("{step}", {"step=15.ckpt": (15, 0), "step=15-v2.ckpt": (15, 2), "step=0.ckpt": (0, 0)},
     ["last.ckpt", "last-v1.ckpt", "step=15.ckpt.tmp", "epoch=0-step=15.ckpt", "step=x.ckpt"]),
    ("{epoch}-{step:05d}", {"epoch=0-step=00015.ckpt": (15, 0),
                            "epoch=12-step=00300-v1.ckpt": (300, 1)},
     ["step=15.ckpt", "last.ckpt", "epoch=0-step=15"]),
    ("run-{step}", {"run-step=7.ckpt": (7, 0)}, ["step=7.ckpt", "run-7.ckpt"]),
])
def test_the_step_files_of_a_template(template, names, other):
    pattern = step_file_pattern(template)
    for name, (step, version) in names.items():
        m = pattern.fullmatch(name)
        assert m and (int(m["step"]), int(m["version"] or 0)) == (step, version), name
    assert not [n for n in other if pattern.fullmatch(n)]


def test_a_template_without_its_metric_names_and_one_without_the_step():
    assert step_file_pattern("{step}", names_inserted=False).fullmatch("15-v1.ckpt")
    for bad in ("{epoch}", "{step}-{step}", "fixed"):
        with pytest.raises(InputError, match="name the step once"):
            step_file_pattern(bad)


def _f(name: str, step: int, written: int, version: int = 0) -> StepFile:
    return StepFile(f"/ckpt/{name}", step, version, written)


def test_the_newest_by_write_time_stay_and_the_protected_ones_too():
    files = [_f("step=10.ckpt", 10, 100), _f("step=15.ckpt", 15, 200),
             _f("step=20.ckpt", 20, 150),  # a killed session's save past the marker
             _f("step=20-v1.ckpt", 20, 300, 1), _f("step=25.ckpt", 25, 400)]
    gone = [f.path for f in surplus(files, 2, protected=())]
    assert gone == ["/ckpt/step=15.ckpt", "/ckpt/step=20.ckpt", "/ckpt/step=10.ckpt"]
    kept_marker = [f.path for f in surplus(files, 2, protected=["/ckpt/step=10.ckpt", None])]
    assert kept_marker == ["/ckpt/step=15.ckpt", "/ckpt/step=20.ckpt"]
    tie = [_f("step=5.ckpt", 5, 100), _f("step=5-v1.ckpt", 5, 100, 1), _f("step=4.ckpt", 4, 100)]
    assert [f.path for f in surplus(tie, 1, ())] == ["/ckpt/step=5.ckpt", "/ckpt/step=4.ckpt"]
    with pytest.raises(ValueError):
        surplus(files, 0, ())


def test_prune_deletes_the_surplus_of_the_folder_and_leaves_what_it_cannot(tmp_path):
    for k, name in enumerate(["step=5.ckpt", "step=10.ckpt", "step=10-v1.ckpt",
                              "step=15.ckpt", "last.ckpt", "notes.txt"]):
        (tmp_path / name).write_text(name)
        os.utime(tmp_path / name, ns=(10**18 + k * 10**9, 10**18 + k * 10**9))
    pattern = step_file_pattern("{step}")
    assert sorted(f.step for f in step_files(tmp_path, pattern)) == [5, 10, 10, 15]
    assert step_files(tmp_path / "absent", pattern) == []
    refused = []

    def remove(path: str) -> None:
        if path.endswith("step=10.ckpt"):
            refused.append(path)
            raise PermissionError(path)
        os.remove(path)

    gone = prune(tmp_path, pattern, 2, [str(tmp_path / "step=5.ckpt")], remove=remove)
    assert gone == [] and refused  # step=10 could not go; step=5 is protected
    assert prune(tmp_path, pattern, 1, [str(tmp_path / "step=5.ckpt")]) == \
        [str(tmp_path / "step=10-v1.ckpt"), str(tmp_path / "step=10.ckpt")]
    assert sorted(p.name for p in tmp_path.iterdir()) == \
        ["last.ckpt", "notes.txt", "step=15.ckpt", "step=5.ckpt"]
