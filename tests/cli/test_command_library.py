"""The library halves of ``afford certify``, ``afford levers`` and ``afford bars`` (issue 31,
item 4): the flags checked in the commands' order and made requests, and the typed results
the thin commands render. The commands themselves are exercised in test_cli.py,
test_levers_sizes_run.py and test_bars.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from afford.api.certify_command import (
    WrittenCertificate,
    certify_request,
    is_noisy,
    measure_and_write,
)
from afford.bars.bars_command import MAX_ADD_K, bars_request, bucket_count, memory_bytes
from afford.core.errors import InputError, MeasurementError
from afford.schema.cert import load_certificate
from tests.paths import DATA, data_file

H200 = data_file("h200_default_d89f7a2.json")
CPU = DATA / "cpu_tinylm_tiny.json"
SIZES = data_file("h200_sizes_levers_63bd66d.json")


# ---- afford certify


@pytest.mark.parametrize("flags,precision", [
    ({}, None), ({"distributed": True}, "adaptive"), ({"quick": True}, "quick"),
    ({"full": True, "distributed": True}, "full"), ({"adaptive": True}, "adaptive")])
def test_certify_request_chooses_the_precision(flags, precision):
    assert certify_request(**flags).precision == precision


def test_certify_request_builds_the_request(tmp_path):
    req = certify_request(workloads=["tinylm"], sweeps=["seq=128,64"], modes=["fp32"],
                          children=4, gates=False, checkpoint_dir=tmp_path,
                          command="afford certify -w tinylm")
    assert req.workloads == ["tinylm"] and req.sweeps == {"seq": [64, 128]}
    assert req.modes == ["fp32"] and req.children == 4 and req.gates is False
    assert req.checkpoint_dir == str(tmp_path) and req.command == "afford certify -w tinylm"


@pytest.mark.parametrize("flags,match", [
    ({"quick": True, "full": True, "workloads": ["no such!!"]}, "contradict"),
    ({"workloads": ["no such!!"], "children": 2}, "no such"),
    ({"children": 2, "sweeps": ["seq"]}, "at least 3"),
    ({"sweeps": ["seq"], "checkpoint_dir": Path("/no/such")}, "NAME=V1"),
    ({"checkpoint_dir": Path("/no/such"), "dist_only": True}, "--checkpoint-dir"),
    ({"dist_only": True}, "--dist-only goes with --distributed"),
])
def test_certify_request_answers_the_first_bad_flag(flags, match):
    with pytest.raises(InputError, match=match):
        certify_request(**flags)


def test_certify_request_refuses_an_existing_out_without_force(tmp_path):
    mine = tmp_path / "c.json"
    mine.write_text("mine")
    with pytest.raises(InputError, match="already exists"):
        certify_request(out=mine, checkpoint_dir=Path("/no/such"))
    assert certify_request(out=mine, force=True).precision is None


def test_a_bad_name_is_answered_before_torch_loads():
    code = ("import sys\nfrom afford.api.certify_command import certify_request\n"
            "from afford.core.errors import InputError\n"
            "for flags in ({'quick': True, 'full': True}, {'workloads': ['no such!!']}):\n"
            "    try:\n        certify_request(**flags)\n    except InputError:\n        pass\n"
            "print('torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.stdout.strip() == "False", done.stderr


def test_measure_and_write_writes_the_default_file_and_says_first_look(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cert = load_certificate(CPU)
    seen = []
    req = certify_request()
    done = measure_and_write(req, measure=lambda r: seen.append(r) or cert)
    assert seen == [req] and done.cert is cert and done.first_look
    assert done.path.parent == Path(".") and done.path.name.startswith("afford-cert-")
    assert load_certificate(done.path) == cert
    again = measure_and_write(certify_request(workloads=["tinylm"]), tmp_path / "o.json",
                              measure=lambda r: cert)
    assert not again.first_look and again.path == tmp_path / "o.json"


def test_written_certificate_says_what_ends_the_run(tmp_path):
    h200 = load_certificate(H200)
    done = WrittenCertificate(h200, tmp_path / "c.json", False)
    done.raise_if_partial()
    done.raise_if_refused()
    assert not done.noisy and not done.halted
    partial = WrittenCertificate(h200.model_copy(update={"status": "partial",
                                                         "failures": ["probes: boom"]}),
                                 tmp_path / "c.json", False)
    with pytest.raises(MeasurementError, match="incomplete: probes: boom. The partial "
                       "certificate is written to .*c.json"):
        partial.raise_if_partial()
    ws = list(h200.workloads)
    ws[0] = ws[0].model_copy(update={"refused": "no gradient"})
    refused = WrittenCertificate(h200.model_copy(update={"workloads": ws}), done.path, False)
    with pytest.raises(InputError, match=f"workload {ws[0].name} refused: no gradient"):
        refused.raise_if_refused()
    halted = h200.model_copy(update={"gates": h200.gates.model_copy(update={"verdict": "HALT"})})
    assert WrittenCertificate(halted, done.path, False).halted
    cpu = load_certificate(CPU)
    assert is_noisy(cpu) and WrittenCertificate(cpu, done.path, False).noisy


# ---- afford levers


def test_prepare_levers_checks_then_resolves_the_job(tmp_path, monkeypatch):
    import afford.certification.stage_levers as jobs
    from afford.api.levers_command import prepare_levers

    calls = []
    monkeypatch.setattr(jobs, "lever_job", lambda *a: calls.append(a) or "job")
    c, job = prepare_levers(SIZES, arms=["narrow=tinylm"], quick=True, children=4,
                            command="afford levers x")
    assert job == "job" and c == load_certificate(SIZES)
    (_, workloads, chosen, mode, precision, children, arms, command), = calls
    assert (workloads, chosen, mode, precision, children, command) == \
        ([], (), None, "quick", 4, "afford levers x")  # --arm alone: only the arms
    assert [a.name for a in arms] == ["narrow"]
    prepare_levers(SIZES, workloads=["tinylm"], levers="bf16,fused", mode="bf16")
    assert calls[-1][1:6] == (["tinylm"], ("bf16", "fused"), "bf16", "adaptive", 3)


@pytest.mark.parametrize("flags,match", [
    ({"quick": True, "full": True, "children": 2}, "contradict"),
    ({"children": 2, "mode": "int4"}, "at least 3"),
    ({"mode": "int4", "workloads": ["no such!!"]}, "--mode 'int4'"),
    ({"arms": ["bad"], "levers": "turbo"}, "--arm 'bad'"),
    ({"levers": "turbo"}, "unknown lever"),
])
def test_prepare_levers_answers_the_first_bad_flag(flags, match):
    from afford.api.levers_command import prepare_levers

    with pytest.raises(InputError, match=match):
        prepare_levers(SIZES, **flags)


def test_levers_result_rows_rungs_and_the_written_certificate(tmp_path):
    from afford.api.levers_command import levers_result

    c = load_certificate(SIZES)
    bare = c.model_copy(update={"levers": None})
    done = levers_result(bare, c.levers)
    assert done.written is None and done.rows and done.section is c.levers
    assert not list(tmp_path.iterdir())
    out = tmp_path / "with.json"
    done = levers_result(bare, c.levers, out)
    assert done.written == out and load_certificate(out).levers == c.levers
    assert all(r.workload for r in done.rungs)


# ---- afford bars


def test_bars_request_reads_the_flags(tmp_path):
    req = bars_request(tmp_path / "d.bin", order="1,3", smoothing=" add-k , kneser-ney",
                       add_k=0.5, discount=0.7, method="streaming", memory="64MiB",
                       buckets="2^12", command="afford bars d.bin")
    assert req.orders == (1, 3) and req.smoothings == ("add-k", "kneser-ney")
    assert (req.k, req.discount, req.method) == (0.5, 0.7, "streaming")
    assert req.memory_bytes == 64 << 20 and req.buckets == 4096
    assert req.command == "afford bars d.bin"


def test_bucket_count_and_memory_bytes():
    assert bucket_count(None) is None and bucket_count("2^8") == 256
    assert bucket_count("1000") == 512 and bucket_count("4Ki") == 4096
    assert memory_bytes("4GiB") == 4 << 30
    for bad in ("2^7", "2^x", "2^41"):
        with pytest.raises(InputError, match="--buckets"):
            bucket_count(bad)
    with pytest.raises(InputError, match="cannot read '-5' as a count"):
        bucket_count("-5")
    for bad in ("lots", "0"):
        with pytest.raises(InputError, match="--memory"):
            memory_bytes(bad)


@pytest.mark.parametrize("flags,match", [
    ({"order": "0", "smoothing": "wat"}, "--order"),
    ({"smoothing": ",", "method": "magic"}, "--smoothing"),
    ({"method": "magic", "add_k": 0}, "--method"),
    ({"add_k": MAX_ADD_K * 10, "discount": 2.0}, "--add-k"),
    ({"discount": 2.0, "memory": "lots"}, "--discount"),
    ({"memory": "lots", "buckets": "2^7"}, "--memory"),
])
def test_bars_request_answers_the_first_bad_flag(flags, match, tmp_path):
    with pytest.raises(InputError, match=match):
        bars_request(tmp_path / "d.bin", **flags)


def test_bars_request_refuses_an_existing_out_before_reading_memory(tmp_path):
    mine = tmp_path / "b.json"
    mine.write_text("mine")
    for flags in ({"out": mine}, {"window_out": mine}):
        with pytest.raises(InputError, match="already exists"):
            bars_request(tmp_path / "d.bin", memory="lots", **flags)
    assert bars_request(tmp_path / "d.bin", out=mine, force=True).orders == (1, 2, 3, 4, 5)
