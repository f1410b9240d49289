"""afford's bytecode cache (:mod:`afford.core.bytecode`): used only where the probe package
carries no bytecode, never beside an installed file, off when asked, and a child started
with it writes and reads its bytecode in afford's folder."""

from __future__ import annotations

import compileall
import subprocess
import sys

import pytest

from afford.core import bytecode


@pytest.fixture
def fake_package(tmp_path, monkeypatch):
    """A package installed from source with no bytecode, in a folder on sys.path."""
    site = tmp_path / "site"
    pkg = site / "fakepkg_nobytecode"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("VALUE = 42\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(sys, "pycache_prefix", None)
    monkeypatch.setattr(sys, "dont_write_bytecode", sys.dont_write_bytecode)
    return pkg


def test_a_package_without_bytecode_is_seen_and_one_with_it_is_not(fake_package):
    assert bytecode.missing("fakepkg_nobytecode")
    compileall.compile_dir(str(fake_package), quiet=1)
    assert not bytecode.missing("fakepkg_nobytecode")
    assert not bytecode.missing("no_such_package_at_all")


def test_start_points_this_process_at_the_cache_only_where_bytecode_is_missing(
        fake_package, tmp_path):
    env = {"AFFORD_CACHE_DIR": str(tmp_path / "cache")}
    folder = bytecode.start(env, probe="fakepkg_nobytecode")
    assert folder == str(tmp_path / "cache" / "bytecode") == sys.pycache_prefix
    assert not sys.dont_write_bytecode


@pytest.mark.parametrize("env", [{"AFFORD_BYTECODE": "off"}, {"AFFORD_CACHE_DIR": "off"},
                                 {"PYTHONPYCACHEPREFIX": "/somewhere/of/the/users"}])
def test_start_changes_nothing_when_turned_off_or_the_user_chose(fake_package, tmp_path, env):
    env = {"AFFORD_CACHE_DIR": str(tmp_path / "cache"), **env} \
        if "AFFORD_CACHE_DIR" not in env else env
    assert bytecode.start(env, probe="fakepkg_nobytecode") is None
    assert sys.pycache_prefix is None


def test_an_install_with_bytecode_is_left_as_it_is(fake_package, tmp_path):
    compileall.compile_dir(str(fake_package), quiet=1)
    assert bytecode.start({"AFFORD_CACHE_DIR": str(tmp_path / "c")},
                          probe="fakepkg_nobytecode") is None


def test_a_child_started_with_the_cache_writes_there_and_says_so(fake_package, tmp_path):
    """Even where the environment says not to write bytecode (as container images do),
    the child writes it in afford's folder, never beside the package's source."""
    folder = tmp_path / "cache" / "bytecode"
    folder.mkdir(parents=True)
    env = bytecode.child_env({"PYTHONDONTWRITEBYTECODE": "1",
                              "PYTHONPATH": str(fake_package.parent)}, str(folder))
    code = ("import fakepkg_nobytecode, afford.core.bytecode as b; "
            "print(fakepkg_nobytecode.VALUE, b.in_use())")
    env["PYTHONPATH"] += ":" + ":".join(p for p in sys.path if p)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.stdout.split() == ["42", "True"], out.stderr
    assert list(folder.rglob("__init__*.pyc")), "no bytecode written in afford's folder"
    assert not (fake_package / "__pycache__").exists()
    plain = subprocess.run([sys.executable, "-c", code],
                           env={"PYTHONPATH": env["PYTHONPATH"]}, capture_output=True,
                           text=True, timeout=120)
    assert plain.stdout.split() == ["42", "False"], plain.stderr
