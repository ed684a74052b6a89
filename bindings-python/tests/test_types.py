"""The generated types hold up under ``mypy --strict``: the package itself, a program written
against them (tests/typed/usage.py), and a program with a wrong key or field, which must fail."""

import subprocess
import sys
from pathlib import Path

import os

import pytest

HERE = Path(__file__).parent
# The package's source (with its stubs), not the installed copy: mypy reads it as `harness`.
SOURCE = HERE.parent / "python"
PACKAGE = SOURCE / "harness"


def mypy(*paths: Path) -> subprocess.CompletedProcess:
    pytest.importorskip("mypy")
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--cache-dir", "/dev/null", *map(str, paths)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=str(SOURCE),
        env={**os.environ, "MYPYPATH": str(SOURCE)},
    )


def test_the_package_and_a_typed_program_pass_mypy_strict():
    r = mypy(PACKAGE, HERE / "typed" / "usage.py")
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize(
    "line, expected",
    [
        ('client.routing_state("r")["providers"][0]["helth"]', '"helth"'),
        ('client.breaker_details("s", "GET", "/x")["state"] + 1', "Unsupported operand"),
        ('client.chat("r", []).contnet', "contnet"),
        ('client.embed("r", ["x"]).vectros', "vectros"),
        ('client.embed("r", ["x"], "3")', '"embed"'),
        ('client.embed("r", "x")', '"embed"'),
        ('client.register_adapter("a", object())', '"Adapter"'),
        ('client.add_interceptor(before=lambda q: q.pth)', "pth"),
        ('client.add_interceptor(lambda q: None, level="sometimes")', '"add_interceptor"'),
        ('x: Config = {"services": {"s": {"base_url": 1}}}', "base_url"),
    ],
)
def test_a_wrong_key_or_field_fails_mypy(tmp_path, line, expected):
    bad = tmp_path / "bad.py"
    bad.write_text(f"import harness\nfrom harness._types import Config\nclient = harness.Client({{}})\n{line}\n")
    r = mypy(bad)
    assert r.returncode != 0 and expected in r.stdout, r.stdout + r.stderr
