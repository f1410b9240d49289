"""Certify's speed-ups, without a device: pre-spawned sweep children are pre-warmed on CUDA
(argv checked with a fake child class), the sweep children's start events are startup runs
(spawn and ready stamps on one clock, worked by hand), and the probes stage spawns no extra
startup children when the sweep gave enough runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

import pytest

import afford.certification.stage_probes as stage
import afford.measure.children as children
from afford.measure.probes.protocol import probe_protocol
from afford.measure.timing import rule_for
from tests.measure.test_probes_stage import env, events, result


class Recorder:
    """Stands in for ``children._Child``: records how each child would be spawned."""

    made: list[Recorder] = []

    def __init__(self, prewarm=None, overlapped=False, warm=(), early=False, describe=False,
                 env=None):
        self.prewarm, self.overlapped, self.warm, self.early = prewarm, overlapped, warm, early
        self.describes, self.env = describe, env
        Recorder.made.append(self)

    def kill(self):
        pass


def _spawns(monkeypatch, device):
    Recorder.made = []
    monkeypatch.setattr(children, "_Child", Recorder)
    used = []
    monkeypatch.setattr(children, "run_child",
                        lambda c, items, spawned=None, **kw: used.append(spawned) or {})
    children.run_children([{"key": "k"}], children=3, device=device, device_class="x",
                          rule=rule_for("quick"), seed=0)
    assert used == Recorder.made  # each child measured with the process spawned for it
    return [(r.prewarm, r.overlapped) for r in Recorder.made]


def test_children_spawned_ahead_on_cuda_are_prewarmed_child_0_is_not(monkeypatch):
    assert _spawns(monkeypatch, "cuda:1") == [(None, False), ("cuda:1", True),
                                              ("cuda:1", True)]


def test_cpu_children_are_neither_spawned_ahead_nor_prewarmed(monkeypatch):
    assert _spawns(monkeypatch, "cpu") == [(None, False)] * 3


def test_on_last_runs_once_as_the_last_child_starts(monkeypatch):
    Recorder.made = []
    monkeypatch.setattr(children, "_Child", Recorder)
    seen = []
    monkeypatch.setattr(children, "run_child",
                        lambda c, items, spawned=None, **kw: seen.append(f"child {c}") or {})
    children.run_children([{"key": "k"}], children=4, device="cuda:0", device_class="x",
                          rule=rule_for("quick"), seed=0, on_last=lambda: seen.append("ahead"))
    assert seen == ["child 0", "child 1", "child 2", "ahead", "child 3"]


def test_stage_children_are_spawned_ahead_on_cuda_only_and_as_asked():
    from afford.certification import spawners_for
    from afford.certification.request import CertifyRequest

    assert sorted(spawners_for(CertifyRequest(), "cuda:0")) == ["memory", "probes"]
    assert sorted(spawners_for(CertifyRequest(memory=False), "cuda")) == ["probes"]
    assert spawners_for(CertifyRequest(probes=False, memory=False), "cuda:0") == {}
    assert spawners_for(CertifyRequest(), "cpu") == {}


def test_a_probe_child_spawned_ahead_is_a_startup_run_on_the_wall_clock():
    """The child stamps ready on the wall clock; process time is ready - spawn, not the
    time the parent got round to reading it."""
    from afford.measure.probes.runner import run_probe_child

    startup = {"event": "probe", "key": "startup",
               "result": {"import_torch_seconds": 2.5, "torch_version": "2.11",
                          "role": "probe child", "ready_wall": 1004.5,
                          "prewarm_seconds": 1.5}}
    gemm = {"event": "probe", "key": "gemm.fp32", "result": {"x": 1}, "seconds": 0.5}
    kid = ScriptedChild([startup, gemm, {"event": "done"}], spawn_wall=1000.0,
                        overlapped=True)
    got, stopped = run_probe_child({"device": "cuda:0"}, spawned=kid)
    assert stopped is None and set(got) == {"startup", "gemm.fp32"}
    run = got["startup"]["result"]
    assert run["process_seconds"] == 4.5 and "ready_wall" not in run
    assert run["role"].startswith("probe child (spawned ahead")


class ScriptedChild:
    """A real process that prints a child's events, with a known spawn stamp."""

    def __init__(self, lines: list[dict], spawn_wall: float, overlapped: bool):
        self.job_file = tempfile.NamedTemporaryFile(mode="w+", suffix=".json", delete=False)
        self.job_file.close()
        script = (f"import sys\nopen({self.job_file.name!r}, 'w').write(sys.stdin.read())\n"
                  + "".join(f"print({json.dumps(e)!r})\n" for e in lines))
        self.err = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.err, text=True)
        self.spawn_wall, self.overlapped = spawn_wall, overlapped

    def stderr_tail(self):
        self.err.seek(0)
        return self.err.read().strip()

    def kill(self):
        self.proc.wait()
        self.err.close()
        with open(self.job_file.name) as f:
            text = f.read()
        self.job = json.loads(text) if text else None  # the job the parent sent
        os.unlink(self.job_file.name)


def test_start_event_gets_process_seconds_from_spawn_and_ready_stamps():
    start = {"event": "start", "pid": 1, "import_torch_seconds": 2.5,
             "import_transformers_seconds": 1.25, "torch_version": "2.11",
             "transformers_version": "5.1", "ready_wall": 1000.75, "prewarmed": True,
             "cuda_init_seconds": 0.125, "prewarm_seconds": 2.0}
    point = {"event": "point", "key": "a", "record": {"child": 1, "order_position": 0}}
    seen = []
    kid = ScriptedChild([start, point, {"event": "done"}], spawn_wall=997.0, overlapped=True)
    out = children.run_child(1, [{"key": "a"}], device="cuda:0", device_class="x",
                             rule=rule_for("quick"), seed=0, on_event=seen.append,
                             spawned=kid)
    assert list(out) == ["a"]
    ev = seen[0]
    assert ev["process_seconds"] == 3.75 and ev["spawn_wall"] == 997.0 and ev["child"] == 1
    run = children.startup_run(ev)
    assert run == {"process_seconds": 3.75, "import_torch_seconds": 2.5,
                   "import_transformers_seconds": 1.25, "cuda_init_seconds": 0.125,
                   "torch_version": "2.11", "transformers_version": "5.1",
                   "role": "sweep child 1 (spawned ahead: its imports overlapped the "
                           "previous child's measurement on the device)"}


def test_a_start_event_without_import_times_is_no_startup_run():
    assert children.startup_run({"event": "start", "child": 0, "pid": 5}) is None


def starts(cuda=True):
    """Three sweep children's start events as the parent completes them."""
    out = []
    for c, (proc, torch_s) in enumerate(((4.0, 2.5), (3.0, 2.0), (5.0, 3.0))):
        e = {"event": "start", "child": c, "import_torch_seconds": torch_s,
             "torch_version": "2.11", "process_seconds": proc, "overlapped": c > 0}
        if cuda and c > 0:
            e["cuda_init_seconds"] = 0.25 * c  # child 0 is not pre-warmed
        out.append(e)
    return out[::-1]  # arrival order does not matter


class Req:
    precision = "adaptive"
    seed = 0
    checkpoint_dir = "/tmp"


class Plan:
    device = "cuda:0"
    device_class = "large-gpu"


def _run(monkeypatch, sweep_starts, cuda=True):
    spawned = []

    def fake_startup(n, device, on_run):
        spawned.append(n)
        return [{"process_seconds": 9.0, "import_torch_seconds": 8.0, "torch_version": "2.11",
                 "cuda_init_seconds": 1.0 if cuda else None} for _ in range(n)]

    monkeypatch.setattr(stage, "run_startup", fake_startup)
    monkeypatch.setattr(stage, "run_probe_child", lambda job, on_event, **kw: (events(), None))
    e = env() if cuda else env("cpu", "AMD EPYC", "cpu")
    results = [result("tiny", "seq", {256: 0.0065, 512: 0.0066}),
               result("tinylm", "seq", {512: 0.015, 1024: 0.031})]
    sec = stage.run_probes(Req(), e, Plan(), results, lambda ev: None,
                           stage.sweep_runs(sweep_starts))
    return spawned, sec


def test_three_sweep_runs_mean_no_startup_children(monkeypatch):
    spawned, sec = _run(monkeypatch, starts())
    assert spawned == []
    s = sec.startup
    assert [r.role for r in s.runs][:1] == ["sweep child 0"] and len(s.runs) == 4
    assert s.runs[-1].role == "probe child"
    # process 4, 3, 5 and the probe child's 2.0: median 3.5; torch 2.5, 2, 3, 1.5: 2.25
    assert s.process_seconds == 3.5 and s.import_torch_seconds == 2.25
    # CUDA init from the pre-warmed children (0.25, 0.5) and the probe child (0.4)
    assert s.cuda_init_seconds == 0.4


def test_without_the_sweeps_runs_the_stage_falls_back_to_startup_children(monkeypatch):
    spawned, sec = _run(monkeypatch, [])
    assert spawned == [2]  # protocol: 3 runs, the probe child is one
    assert [r.role for r in sec.startup.runs] == ["startup", "startup", "probe child"]
    spawned, _ = _run(monkeypatch, starts()[:1])
    assert spawned == [1]


def test_cuda_init_is_not_executable_on_the_cpu(monkeypatch):
    _, sec = _run(monkeypatch, starts(cuda=False), cuda=False)
    assert sec.startup.cuda_init_seconds.status == "NOT EXECUTABLE"


def test_extra_startup_children_count():
    p = probe_protocol("adaptive", "cuda", "large-gpu")
    assert [stage.extra_startup_children(p, n) for n in range(5)] == [2, 1, 0, 0, 0]


def test_probe_seconds_are_kept_per_probe(monkeypatch):
    def timed():
        ev = events()
        ev["gemm.fp32"]["seconds"] = 0.5
        ev["w0.ladder"]["seconds"] = 2.25
        return ev

    monkeypatch.setattr(stage, "run_startup", lambda n, d, f: [])
    monkeypatch.setattr(stage, "run_probe_child", lambda job, on_event, **kw: (timed(), None))
    results = [result("tiny", "seq", {256: 0.0065})]
    sec = stage.run_probes(Req(), env(), Plan(), results, lambda ev: None, [])
    assert sec.probe_seconds == {"gemm.fp32": 0.5, "w0.ladder": 2.25}


def test_the_sweep_child_module_imports_no_torch():
    code = ("import sys, afford.measure.sweep_child; "
            "print('torch' in sys.modules, 'numpy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=children.child_env(), check=True)
    assert out.stdout.split() == ["False", "False"]


@pytest.mark.cuda
def test_prewarm_creates_the_context_and_times_it():
    code = ("import json, sys; from afford.measure.sweep_child import prewarm; "
            "from afford.measure.probes.startup import measure_imports; "
            "measure_imports(None); print(json.dumps(prewarm('cuda:0')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=children.child_env(), check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["cuda_init_seconds"] > 0 and got["prewarm_seconds"] > 0


def test_median_ci_ranks_match_scipy_binomial():
    """The exact integer binomial CDF picks the same order statistics as scipy did."""
    from scipy import stats

    from afford.fit.stats import median_ci

    def scipy_ranks(n, confidence):
        alpha = 1.0 - confidence
        r = int(stats.binom.ppf(alpha / 2.0, n, 0.5))
        while r >= 1 and 2.0 * stats.binom.cdf(r - 1, n, 0.5) > alpha:
            r -= 1
        while 2.0 * stats.binom.cdf(r, n, 0.5) <= alpha:
            r += 1
        r = max(r, 1)
        return r - 1, n - r

    for confidence in (0.9, 0.95, 0.99):
        for n in list(range(6, 260)) + [511, 1000, 2999]:
            assert median_ci(list(range(n)), confidence) == scipy_ranks(n, confidence)


def test_the_timing_path_imports_no_scipy():
    code = "import sys, afford.measure.timing; print('scipy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=children.child_env(), check=True)
    assert out.stdout.split() == ["False"]


def test_the_console_script_spawns_certifys_first_child_only_for_a_plain_certify():
    from afford._entry import early_child

    assert early_child(["certify"]) == (True, "auto")
    assert early_child(["certify", "--quick", "--device", "cuda:1"]) == (True, "cuda:1")
    assert early_child(["certify", "--device=cpu"]) == (True, None)
    assert early_child(["certify", "--help"]) == (False, None)
    assert early_child(["certify", "--distributed"]) == (False, None)
    assert early_child(["plan", "cert.json"]) == (False, None)
    assert early_child([]) == (False, None)


def test_an_early_child_is_taken_only_where_it_suits_the_device(monkeypatch):
    made = []

    class Early(Recorder):
        killed = False

        def kill(self):
            self.killed = True

    monkeypatch.setattr(children, "_Child", Early)
    for prewarm, device, taken in (("auto", "cuda", True), ("auto", "cpu", True),
                                   (None, "cpu", True), ("cuda:1", "cuda:1", True),
                                   ("cuda:1", "cuda:0", False), (None, "cuda", False)):
        children.spawn_early(prewarm)
        kid = children._EARLY[-1]
        made.append(kid)
        got = children.take_early(device)
        assert (got is kid) == taken and kid.killed == (not taken) and kid.early
    assert children.take_early("cuda") is None  # one child, taken once


def test_the_early_childs_imports_leave_transformers_to_the_workloads_that_need_it():
    """Certify's first sweep child, spawned as the command starts, is a contended startup
    run (no figure counts it): it times torch's import only, unless a --warm workload needs
    transformers; every other run times both."""
    code = ("import sys\nfrom afford.measure.probes.startup import measure_imports\n"
            "out = measure_imports(None, transformers=False)\n"
            "print('transformers' in sys.modules, 'import_transformers_seconds' in out, "
            "out['import_torch_seconds'] > 0)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=children.child_env(), timeout=300)
    assert done.returncode == 0 and done.stdout.split() == ["False", "False", "True"], \
        done.stderr


def test_the_package_entry_imports_no_torch():
    code = "import sys, afford._entry; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=children.child_env(), check=True)
    assert out.stdout.split() == ["False"]


def test_a_contended_startup_run_is_kept_but_left_out_of_the_medians(monkeypatch):
    early = starts()[::-1]
    early[0] = {**early[0], "early": True}  # child 0, spawned as the command started
    run0 = children.startup_run(early[0])
    assert run0["contended"] is True and "overlapped the parent's" in run0["role"]
    assert "contended" not in children.startup_run(early[1])
    _, sec = _run(monkeypatch, early)
    s = sec.startup
    assert len(s.runs) == 4 and s.runs[0].contended
    # process 3, 5 and the probe child's 2.0 -> 3.0; torch 2, 3, 1.5 -> 2.0
    assert s.process_seconds == 3.0 and s.import_torch_seconds == 2.0


def test_memory_child_spawned_beside_the_probe_child_waits_before_importing(monkeypatch):
    import afford.measure.memory_sweep as ms

    got = {}
    monkeypatch.setattr(children, "Spawned",
                        lambda module, args, env=None, overlapped=False: got.update(
                            module=module, args=args, overlapped=overlapped))
    ms.spawn_memory_child("cuda:0", overlapped=True, stagger=8.0)
    assert got == {"module": "afford.measure.memory_sweep", "overlapped": True,
                   "args": ["--prewarm", "cuda:0", "--stagger", "8"]}
    ms.spawn_memory_child("cpu")
    assert got["args"] == []


class _Proc:
    """A real child for children.exchange: python -c CODE, stderr kept."""

    def __init__(self, code: str):
        self.err = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.err, text=True)

    def stderr_tail(self):
        self.err.seek(0)
        return self.err.read().strip()

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.err.close()


def test_exchange_streams_lines_and_stops_a_hung_child():
    seen = []
    kid = _Proc("import json, sys, time\njob = json.load(sys.stdin)\n"
                "print(json.dumps({'got': job['n']}), flush=True)\ntime.sleep(60)")
    rc, _, expired = children.exchange(kid, {"n": 7}, seen.append, timeout=2.0)
    assert seen == [{"got": 7}] and expired and rc != 0
    assert kid.proc.poll() is not None


def test_exchange_reports_a_child_that_dies_at_once():
    kid = _Proc("import sys\nsys.stderr.write('no such workload')\nsys.exit(3)")
    rc, tail, expired = children.exchange(kid, {"n": 1}, lambda e: None, timeout=30.0)
    assert (rc, tail, expired) == (3, "no such workload", False)


def test_items_from_the_first_childs_records_go_to_the_children_after_it(monkeypatch):
    monkeypatch.setattr(children, "_Child", Recorder)
    asked = []

    def fake_run(c, items, spawned=None, **kw):
        asked.append((c, sorted(it["key"] for it in items)))
        return {it["key"]: {"record": {"child": c}} for it in items}

    monkeypatch.setattr(children, "run_child", fake_run)
    seen = []
    children.run_children([{"key": "a"}, {"key": "b"}], children=3, device="cuda:0",
                          device_class="x", rule=rule_for("quick"), seed=0,
                          after_first=lambda first, items: seen.append(sorted(first)) or
                          [*items, {"key": "ext"}])
    assert seen == [["a", "b"]]
    assert asked == [(0, ["a", "b"]), (1, ["a", "b", "ext"]), (2, ["a", "b", "ext"])]


def test_the_timeline_is_written_only_when_asked(tmp_path, monkeypatch):
    from afford.measure.timeline import TIMELINE_ENV, mark

    path = tmp_path / "timeline.jsonl"
    monkeypatch.delenv(TIMELINE_ENV, raising=False)
    mark("stage", name="sweep")
    assert not path.exists()
    monkeypatch.setenv(TIMELINE_ENV, str(path))
    mark("stage", name="sweep")
    mark("event", pid=1, event="point", key="k")
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert [x["what"] for x in lines] == ["stage", "event"] and lines[1]["key"] == "k"
    assert lines[0]["wall"] <= lines[1]["wall"]
    monkeypatch.setenv(TIMELINE_ENV, str(tmp_path / "no" / "such" / "dir.jsonl"))
    mark("stage", name="done")  # an unwritable timeline never fails the run


def test_children_spawned_here_resolve_the_slow_workloads_while_they_wait(monkeypatch):
    Recorder.made = []
    monkeypatch.setattr(children, "_Child", Recorder)
    monkeypatch.setattr(children, "run_child", lambda c, items, spawned=None, **kw: {})
    children.run_children([{"key": "k"}], children=3, device="cuda:0", device_class="x",
                          rule=rule_for("quick"), seed=0, early=False, warm=("hf:gpt2",))
    assert [r.warm for r in Recorder.made] == [("hf:gpt2",)] * 3


def test_only_transformers_and_user_workloads_are_worth_warming():
    from afford.measure.children import warm_args, warm_specs

    specs = ["tinylm", "softmax+fused", "hf:gpt2+b8s1024", "pkg.mod:factory", "hf:gpt2+b8s1024",
             "tinylm@q3+compile"]
    assert warm_specs(specs) == ["hf:gpt2+b8s1024", "pkg.mod:factory"]
    assert warm_args(["tinylm", "hf:gpt2"]) == ["--warm", "hf:gpt2"]


def test_the_early_child_gets_the_command_lines_workloads():
    from afford._entry import workload_args

    assert workload_args(["-w", "hf:gpt2", "--device", "cuda", "--workload=tinylm",
                          "--workload", "x:y"]) == ("hf:gpt2", "tinylm", "x:y")
    assert workload_args(["--sweep", "seq=8", "-w"]) == ()


def test_a_child_resolves_its_warm_workloads_and_ignores_bad_ones():
    code = ("import sys\nfrom afford.measure.sweep_child import warm\n"
            "warm(['--prewarm', 'cpu', '--warm', 'tests.user_workload:factory', "
            "'--warm', 'no.such.module:f'])\n"
            "print('tests.user_workload' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "True", done.stderr


def test_the_items_the_first_two_settled_go_to_the_third_child_as_skipped(monkeypatch):
    monkeypatch.setattr(children, "_Child", Recorder)
    asked = []

    def fake_run(c, items, spawned=None, skipped=(), **kw):
        asked.append((c, sorted(it["key"] for it in items),
                      sorted(it["key"] for it in skipped)))
        return {it["key"]: {"record": {"child": c}} for it in items}

    monkeypatch.setattr(children, "run_child", fake_run)
    seen = []

    def second(done, items):
        seen.append([sorted(d) for d in done])
        return [it for it in items if it["key"] != "b"], \
            [{**it, "skipped": "settled"} for it in items if it["key"] == "b"]

    children.run_children([{"key": "a"}, {"key": "b"}], children=3, device="cuda:0",
                          device_class="x", rule=rule_for("quick"), seed=0,
                          after_second=second)
    assert seen == [[["a", "b"], ["a", "b"]]]
    assert asked == [(0, ["a", "b"], []), (1, ["a", "b"], []), (2, ["a"], ["b"])]


def test_a_skipped_point_gets_a_record_without_a_median_and_no_profile():
    """The child neither times nor profiles the points it skips (certify reads a settled
    point's busy time off its wall); each still gets a record that says why, so every
    point has one per child, and the job sent to the child does not name them."""
    start = {"event": "start", "pid": 1, "ready_wall": 1.0}
    point = {"event": "point", "key": "a", "record": {"child": 2, "order_position": 0,
                                                      "median_seconds": 0.01}}
    dev = {"busy_seconds": 0.009, "kernels": 40.0}
    lines = [start, point, {"event": "device", "key": "a", "record": {"device_steps": [dev]}},
             {"event": "done"}]
    seen = []
    skip = [{"key": "b", "skipped": "settled by children 0 and 1"}]
    kid = ScriptedChild(lines, 0.0, True)
    out = children.run_child(2, [{"key": "a"}], device="cuda:0", device_class="x",
                             rule=rule_for("quick"), seed=0, on_event=seen.append,
                             spawned=kid, options={"profile": True}, skipped=skip)
    assert out["a"]["record"]["median_seconds"] == 0.01
    assert out["a"]["record"]["device_steps"] == [dev]
    assert out["b"]["record"] == {"child": 2, "order_position": 1,
                                  "skipped": "settled by children 0 and 1"}
    assert [e["key"] for e in seen if e["event"] == "point"] == ["a", "b"]
    assert [it["key"] for it in kid.job["items"]] == ["a"] and "profile_only" not in kid.job


class _Talker:
    """A process standing in for certify's early child: ``code`` runs in it; stdout is the
    parent's to read, as a sweep child's is."""

    describes = True
    described = None

    def __init__(self, code: str) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                                     stdin=subprocess.PIPE, text=True)

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()


@pytest.mark.parametrize("code, timeout, want", [
    ("import json; print(json.dumps({'event': 'described', 'configs': "
     "{'hf:x': {'facts': {'model_type': 'x'}}, 'hf:y': 'not a dict'}}), flush=True)",
     60, {"hf:x": {"facts": {"model_type": "x"}}}),
    ("import sys; sys.exit(3)", 60, {}),  # died before describing: the parent resolves
    ("print('not json', flush=True)", 60, {}),
    ("print('{\"event\": \"start\"}', flush=True)", 60, {}),  # no description in it
    ("import time; time.sleep(30)", 0.5, {}),  # said nothing in time
])
def test_the_early_childs_description_is_read_once_or_given_up(monkeypatch, code, timeout, want):
    """The parent plans an hf: workload from the early child's first line when it is a
    description; anything else (the child died, spoke garbage, said nothing in time) leaves
    the parent to resolve the specs itself."""
    kid = _Talker(code)
    monkeypatch.setattr(children, "_EARLY", [kid])
    try:
        got = children.early_described(["hf:x", "hf:y", "hf:z"], timeout=timeout)
        assert got == want
        assert children.early_described(["hf:x"], timeout=timeout) == \
            {k: v for k, v in want.items() if k == "hf:x"}  # read once, kept
    finally:
        kid.kill()


def test_a_child_that_does_not_describe_is_never_read_for_a_description(monkeypatch):
    kid = _Talker("print('{\"event\": \"start\"}', flush=True)")
    kid.describes = False
    monkeypatch.setattr(children, "_EARLY", [kid])
    try:
        assert children.early_described(["hf:x"], timeout=5) == {}
        assert kid.proc.stdout.readline().strip() == '{"event": "start"}'  # left for exchange
    finally:
        kid.kill()
