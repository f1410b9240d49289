"""Each memory point starts as a fresh process does: the cuBLAS workspaces freed before the
cached blocks are given back and the peaks reset (afford.measure.memory_peaks.fresh_state).
CUDA is faked here: the calls and their order are what is asserted; the device run that
shows the figure move is recorded in lab/device-runs."""

from __future__ import annotations

import torch

from afford.measure import memory_peaks


def _fake_cuda(monkeypatch, calls: list[str], with_clear: bool = True) -> None:
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: calls.append("sync"))
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: calls.append("empty_cache"))
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats",
                        lambda *a: calls.append("reset_peaks"))
    if with_clear:
        monkeypatch.setattr(torch._C, "_cuda_clearCublasWorkspaces",
                            lambda: calls.append("clear_workspaces"), raising=False)
    else:
        monkeypatch.delattr(torch._C, "_cuda_clearCublasWorkspaces", raising=False)


def test_window_frees_workspaces_before_the_cache_and_resets_peaks_last(monkeypatch):
    calls: list[str] = []
    _fake_cuda(monkeypatch, calls)
    memory_peaks.MemoryWindow(torch.device("cuda", 0)).open()
    assert calls == ["sync", "clear_workspaces", "empty_cache", "reset_peaks"]


def test_an_older_torch_without_the_call_still_empties_the_cache(monkeypatch):
    calls: list[str] = []
    _fake_cuda(monkeypatch, calls, with_clear=False)
    memory_peaks.fresh_state(torch.device("cuda", 0))
    assert calls == ["sync", "empty_cache"]
