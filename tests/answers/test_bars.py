"""n-gram bars: the window, exact counts and smoothing worked by hand, streaming against exact,
convergence to known entropy rates, provisional bars on unpinned data, and the CLI."""

import hashlib
import json
import math
import subprocess
import sys

import numpy as np
import pytest
from typer.testing import CliRunner

from afford.bars import count_exact, count_streaming, parse_orders, score
from afford.bars.counting import gram_keys
from afford.bars.hashed import HashedCounter
from afford.bars.record import BarsRequest, make_bars
from afford.bars.smoothing import add_k, distribution, kneser_ney, ney_discount
from afford.bars.window import BATCHES, FIXED, WindowError, cut, parse_heldout, sha256_hex
from afford.cli import app
from afford.core.errors import InputError
from afford.schema import manifest as mf
from afford.schema.bars_file import BarsFile, load_bars
from tests.bars_sources import entropy_bits, iid, markov

runner = CliRunner()


def u8(s: bytes) -> np.ndarray:
    return np.frombuffer(s, np.uint8)


def table(level, k):
    return {int(key).to_bytes(k, "big"): int(v)
            for key, v in zip(level.table.keys, level.table.values)}


# ---------------------------------------------------------------- the window


@pytest.mark.parametrize("spec,n,offset,length,how", [
    ("last:100KB", 1_000_000, 900_000, 100_000, FIXED),
    ("first:1KiB", 5000, 0, 1024, FIXED),
    ("2000:1000", 5000, 2000, 1000, FIXED),
    ("batches:10x10x1024", 1_000_000, 1_000_000 - 102_400, 102_400, BATCHES),
    ("batches:10x2x1024", 1_000_000, 1_000_000 - 20_480, 20_480, BATCHES),
    ("batches:2x2x8@first", 100, 0, 32, BATCHES),
    ("batches:2x2x8@10", 100, 10, 32, BATCHES),
])
def test_window_specs(spec, n, offset, length, how):
    w = cut(parse_heldout(spec), n)
    assert (w.offset, w.length, w.spec.cut) == (offset, length, how)
    assert w.train_bytes == n - length
    assert sum(m for _, m in w.train_segments) == n - length


def test_window_arithmetic_is_printed_as_such():
    assert parse_heldout("batches:10x10x1024").arithmetic == "10 x 10 x 1024 = 102,400 bytes"
    assert parse_heldout("batches:10x2x1024").arithmetic == "10 x 2 x 1024 = 20,480 bytes"
    assert parse_heldout("last:100KB").arithmetic == "100,000 bytes"


def test_window_in_the_middle_leaves_two_training_segments():
    w = cut(parse_heldout("30:20"), 100)
    assert w.train_segments == ((0, 30), (50, 50))


@pytest.mark.parametrize("spec", ["last", "last:", "middle:abc", "batches:10x10",
                                  "batches:0x1x2", "last:0", "x:1KB"])
def test_window_malformed(spec):
    with pytest.raises(WindowError):
        parse_heldout(spec)


@pytest.mark.parametrize("spec", ["last:200", "150:60", "first:100"])
def test_window_must_fit_and_leave_training_bytes(spec):
    with pytest.raises(WindowError):
        cut(parse_heldout(spec), 100)


def test_window_hash_is_the_sha256_of_its_bytes():
    data = u8(b"hello, window")
    assert sha256_hex(data[7:]) == hashlib.sha256(b"window").hexdigest()


def test_parse_orders():
    assert parse_orders("1..5") == (1, 2, 3, 4, 5)
    assert parse_orders("1,3,5") == (1, 3, 5)
    assert parse_orders("5") == (5,)
    for bad in ("0..3", "5..1", "a", "1..9"):
        with pytest.raises(ValueError):
            parse_orders(bad)


# ---------------------------------------------------------------- exact counts by hand


def test_gram_keys_pack_first_byte_high():
    assert gram_keys(u8(b"abc"), 2).tolist() == [0x6162, 0x6263]
    assert gram_keys(u8(b"ab"), 3).tolist() == []


def test_counts_of_abracadabra_by_hand():
    st = count_exact([u8(b"abracadabra")], 3)
    assert table(st.raw[1], 1) == {b"a": 5, b"b": 2, b"c": 1, b"d": 1, b"r": 2}
    assert table(st.raw[2], 2) == {b"ab": 2, b"br": 2, b"ra": 2, b"ac": 1, b"ca": 1,
                                   b"ad": 1, b"da": 1}
    assert table(st.raw[3], 3) == {b"abr": 2, b"bra": 2, b"rac": 1, b"aca": 1, b"cad": 1,
                                   b"ada": 1, b"dab": 1}
    # continuation counts: distinct bytes seen before: a after r, c, d; b after a only
    assert table(st.cont[1], 1) == {b"a": 3, b"b": 1, b"c": 1, b"d": 1, b"r": 1}
    # context 'a' in the raw bigrams: ab 2 + ac 1 + ad 1 = 4 followers' total, 3 distinct
    tot, n = st.raw[2].context(np.array([ord("a")], np.uint64))
    assert (int(tot[0]), int(n[0])) == (4, 3)
    assert (st.raw[1].n1, st.raw[1].n2) == (2, 2)


def test_no_gram_spans_the_hole_between_segments():
    st = count_exact([u8(b"ab"), u8(b"cd")], 2)
    assert table(st.raw[2], 2) == {b"ab": 1, b"cd": 1}
    assert table(st.raw[1], 1) == {b"a": 1, b"b": 1, b"c": 1, b"d": 1}
    # the totals of a context exclude the segment's last byte: 'b' ends a segment
    tot, _ = st.raw[2].context(np.array([ord("b")], np.uint64))
    assert tot[0] == 0


# ---------------------------------------------------------------- smoothing by hand


def test_kneser_ney_order1_by_hand():
    st = count_exact([u8(b"abracadabra")], 1)
    d = 2 / (2 + 2 * 2)                     # n1 = 2 (c, d), n2 = 2 (b, r)
    assert ney_discount(2, 2) == pytest.approx(d)
    c = {"a": 5, "b": 2, "r": 2}
    p = {w: (c[w] - d + d * 5 / 256) / 11 for w in c}
    bits = -sum(math.log2(p[w]) for w in "abra")
    s = kneser_ney(st, 1, u8(b"abra"))
    assert s.bits == pytest.approx(bits, rel=1e-12)
    assert s.bpb == pytest.approx(bits / 4, rel=1e-12)


def test_kneser_ney_order2_by_hand():
    # train "aab": c(a)=2 c(b)=1; c(aa)=1 c(ab)=1; continuation N1+(.a)=1 N1+(.b)=1
    st = count_exact([u8(b"aab")], 2)
    D = 0.5
    p_a = (2 - D + D * 2 / 256) / 3               # byte 0: no context, order-1 model (raw)
    p1_b = (1 - D + D * 2 / 256) / 2               # continuation level for 'b'
    p2_b = (1 - D + D * 2 * p1_b) / 2              # raw bigram level, context 'a': T 2, N 2
    s = kneser_ney(st, 2, u8(b"ab"), discount=D)
    assert s.bits == pytest.approx(-math.log2(p_a) - math.log2(p2_b), rel=1e-12)
    assert s.discounts == (D, D)


def test_add_k_by_hand():
    st = count_exact([u8(b"aab")], 2)
    s = add_k(st, 2, u8(b"ab"), k=1.0)
    assert s.bits == pytest.approx(-math.log2(3 / 259) - math.log2(2 / 258), rel=1e-12)
    s = add_k(st, 2, u8(b"ab"), k=0.5)
    assert s.bits == pytest.approx(-math.log2(2.5 / 131) - math.log2(1.5 / 130), rel=1e-12)


def test_no_singletons_falls_back_to_half_and_says_so():
    st = count_exact([u8(b"aabb")], 1)          # counts 2, 2: n1 = 0
    s = kneser_ney(st, 1, u8(b"ab"))
    assert s.discounts == (0.5,) and "D = 0.5" in s.warnings[0]


@pytest.mark.parametrize("smoothing", ["kneser-ney", "add-k"])
@pytest.mark.parametrize("context", [b"", b"ab", b"ra", b"zz", b"\x00\x01\x02\x03"])
def test_every_prediction_sums_to_one(smoothing, context):
    st = count_exact([u8(b"abracadabra, abracadabra: cadabra!")], 4)
    for order in (1, 2, 4):
        p = distribution(st, order, context, smoothing=smoothing)
        assert p.shape == (256,) and (p > 0).all()
        assert p.sum() == pytest.approx(1.0, abs=1e-12)


def test_higher_order_beats_lower_on_structured_text():
    text = (b"the cat sat on the mat. the dog sat on the log. " * 300)
    st = count_exact([u8(text[:-500])], 5)
    b = {s.order: s.bpb for s in score(st, u8(text[-500:]), [1, 3, 5], ["kneser-ney"])}
    assert b[5] < b[3] < b[1]


# ---------------------------------------------------------------- streaming


def _both(data: np.ndarray, window: np.ndarray, order: int, buckets: int, chunk: int):
    ex = count_exact([data], order)
    c = count_streaming([[data[i:i + chunk] for i in range(0, len(data), chunk)]], order,
                        buckets)
    return ex, c


@pytest.mark.parametrize("order", [2, 4])
def test_streaming_equals_exact_while_nothing_is_dropped(order):
    """Order 2 fits 2^16 slots (indexed directly); orders 3-4 are hashed with probing."""
    x, _ = markov(42_000, symbols=12, order=2, seed=3)
    data, window = x[:40_000], x[40_000:]
    ex, c = _both(data, window, order, 1 << 16, chunk=7_777)  # odd chunks: boundaries
    assert all(h.dropped == 0 for h in c.hashing_report())
    assert [h.direct for h in c.hashing_report()] == [True, True, False, False][:order]
    assert c.positions == len(data)
    a = score(ex, window, range(1, order + 1))
    b = score(c.stats(), window, range(1, order + 1), renormalise=True)
    for s, t in zip(a, b):
        assert (s.order, s.smoothing) == (t.order, t.smoothing)
        assert t.bits == pytest.approx(s.bits, rel=1e-9)


def test_streaming_when_slots_run_out_drops_and_says_so():
    x, _ = markov(40_500, symbols=12, order=2, seed=3)
    data, window = x[:40_000], x[40_000:]
    c = count_streaming([[data]], 4, buckets=1 << 8)
    rep = {h.order: h for h in c.hashing_report()}
    assert rep[1].direct and rep[1].dropped == 0
    assert not rep[4].direct and rep[4].dropped > 0 and rep[4].occupied == 256
    assert rep[4].occurrences == len(data) - 3
    kn = kneser_ney(c.stats(), 4, window, renormalise=True)
    assert math.isfinite(kn.bpb) and kn.bpb < 8


def test_streaming_segments_do_not_join():
    c = count_streaming([[u8(b"ab")], [u8(b"cd")]], 2, 1 << 16)
    assert c.raw[2][ord("b") * 256 + ord("c")] == 0
    assert c.raw[2][ord("a") * 256 + ord("b")] == 1


def test_hashed_counter_refuses_a_bucket_count_not_a_power_of_two():
    with pytest.raises(ValueError):
        HashedCounter(3, 1000)


# ---------------------------------------------------------------- convergence


def test_iid_unigram_converges_to_the_entropy():
    p = np.array([0.5, 0.25, 0.125, 0.0625, 0.0625])
    H = entropy_bits(p)                          # 1.875 bits, in closed form
    x = iid(1_200_000, p, seed=5)
    st = count_exact([x[:1_000_000]], 1)
    kn = kneser_ney(st, 1, x[1_000_000:])
    assert H == pytest.approx(1.875)
    assert kn.bpb == pytest.approx(H, rel=0.005)


@pytest.mark.parametrize("symbols,order", [(32, 1), (8, 2)])
def test_markov_estimate_converges_to_the_entropy_rate(symbols, order):
    """1 MB of training: Kneser-Ney of order (source order + 1) within 1 % of H (stated
    tolerance for CI; the 10 MB check within 1 % is the slow test below and the bench), and
    closer than at 100 KB."""
    x, H = markov(1_300_000, symbols=symbols, order=order, seed=7)
    window = x[1_000_000:]                       # 300 KB: window noise ~0.1 %
    err = {n: abs(kneser_ney(count_exact([x[:n]], order + 1), order + 1, window).bpb / H - 1)
           for n in (100_000, 1_000_000)}
    assert err[1_000_000] < 0.01
    assert err[1_000_000] < err[100_000]


@pytest.mark.slow
def test_markov_within_one_percent_at_10mb():
    x, H = markov(10_300_000, symbols=64, order=1, alpha=0.3, seed=1)
    kn = kneser_ney(count_exact([x[:10_000_000]], 2), 2, x[10_000_000:])
    assert abs(kn.bpb / H - 1) < 0.01


# ---------------------------------------------------------------- bars files


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    x, _ = markov(60_000, symbols=16, order=2, seed=11)
    p = tmp_path_factory.mktemp("bars") / "corpus.bin"
    p.write_bytes(x.tobytes())
    return p


def test_bars_on_unpinned_data_are_provisional(corpus, tmp_path):
    doc = make_bars(BarsRequest(data=corpus, heldout="batches:2x4x512", orders=(1, 3),
                                manifest=tmp_path / "none.json"))
    assert doc.provisional and not doc.data.pinned
    assert all(b.bpb.provisional for b in doc.bars)
    assert doc.window.arithmetic == "2 x 4 x 512 = 4,096 bytes"
    raw = corpus.read_bytes()
    assert doc.window.sha256 == hashlib.sha256(raw[-4096:]).hexdigest()
    assert doc.data.sha256 == hashlib.sha256(raw).hexdigest()
    assert all(b.window_sha256 == doc.window.sha256 for b in doc.bars)
    assert "not pinned" in doc.warnings[0]


def test_bars_on_pinned_data_are_not_provisional(corpus, tmp_path):
    m = tmp_path / "afford.manifest.json"
    mf.pin_into(m, [mf.pin_path(corpus, "markov")])
    doc = make_bars(BarsRequest(data=corpus, heldout="last:4KB", orders=(2,), manifest=m))
    assert not doc.provisional and doc.data.source == "markov"
    assert not any(b.bpb.provisional for b in doc.bars) and doc.warnings == []


def test_bars_file_round_trip_and_refuses_a_bar_from_another_window(corpus, tmp_path):
    doc = make_bars(BarsRequest(data=corpus, heldout="last:4KB", orders=(1, 2),
                                smoothings=("kneser-ney",)))
    p = tmp_path / "bars.json"
    p.write_text(doc.to_json())
    again = load_bars(p)
    assert again == doc and again.bar("kn:2").order == 2
    raw = json.loads(p.read_text())
    raw["bars"][0]["window_sha256"] = "0" * 64
    with pytest.raises(ValueError, match="window"):
        BarsFile.model_validate(raw)


def test_streaming_method_states_its_approximation(corpus):
    doc = make_bars(BarsRequest(data=corpus, heldout="last:4KB", orders=(4,),
                                method="streaming", buckets=1 << 12))
    c = doc.counting
    assert c.method == "streaming" and "renormalised" in c.approximation
    assert [h.direct for h in c.hashing] == [True, False, False, False]


def test_missing_data_is_bad_input(tmp_path):
    with pytest.raises(InputError):
        make_bars(BarsRequest(data=tmp_path / "nope", heldout="last:1KB", orders=(1,)))


# ---------------------------------------------------------------- the command line


def test_cli_bars_json(corpus, tmp_path):
    out = tmp_path / "b.json"
    win = tmp_path / "window.bin"
    r = runner.invoke(app, ["bars", str(corpus), "--heldout", "batches:2x4x512", "--order",
                            "1..3", "--json", "--out", str(out), "--window-out", str(win),
                            "--manifest", str(tmp_path / "m.json")])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["schema"] == "afford.bars/1" and len(doc["bars"]) == 6
    assert doc["window"]["arithmetic"] == "2 x 4 x 512 = 4,096 bytes"
    assert load_bars(out).window.sha256 == doc["window"]["sha256"]
    assert win.read_bytes() == corpus.read_bytes()[-4096:]
    assert hashlib.sha256(win.read_bytes()).hexdigest() == doc["window"]["sha256"]
    assert doc["window"]["bytes_path"] == str(win)
    r = runner.invoke(app, ["bars", str(corpus), "--out", str(out)])
    assert r.exit_code == 2 and "already exists" in r.output


def test_cli_bars_table_shows_the_window_hash_on_every_bar(corpus, tmp_path):
    r = runner.invoke(app, ["bars", str(corpus), "--order", "1,2", "--heldout", "last:4KB",
                            "--manifest", str(tmp_path / "m.json")])
    assert r.exit_code == 0, r.output
    sha = hashlib.sha256(corpus.read_bytes()[-4000:]).hexdigest()
    assert sha in r.stdout
    rows = [line for line in r.stdout.splitlines() if "bit/B" in line]
    assert len(rows) == 4 and all(sha[:12] in line and "?" in line for line in rows)


@pytest.mark.parametrize("args,match", [
    (["--heldout", "last:1GB"], "does not fit"),
    (["--heldout", "nonsense"], "--heldout"),
    (["--order", "0..3"], "--order"),
    (["--smoothing", "witten-bell"], "--smoothing"),
    (["--method", "fast"], "--method"),
    (["--add-k", "0"], "--add-k"),
    (["--buckets", "12"], "--buckets"),
])
def test_cli_bars_bad_input_exits_2(corpus, args, match):
    r = runner.invoke(app, ["bars", str(corpus), *args])
    assert r.exit_code == 2, r.output
    assert match in r.output and "Traceback" not in r.output


def test_cli_bars_missing_file_exits_2(tmp_path):
    r = runner.invoke(app, ["bars", str(tmp_path / "nope.bin")])
    assert r.exit_code == 2 and "no such file" in r.output


@pytest.mark.parametrize("command,flag", [("bars", "--heldout"), ("milestones", "--history")])
def test_help_imports_no_torch(command, flag):
    code = (f"import sys; sys.argv = ['afford', '{command}', '--help']\n"
            "from afford._entry import main\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print('TORCH' if 'torch' in sys.modules else 'NO-TORCH')")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    assert flag in r.stdout and r.stdout.strip().endswith("NO-TORCH")
