"""The Python quickstart runs against the embedded test upstream."""

import subprocess
import sys

from conftest import REPO, _upstream_bin


def test_quickstart_runs():
    out = subprocess.run(
        [sys.executable, str(REPO / "examples" / "python" / "quickstart.py")],
        env={"HARNESS_UPSTREAM_BIN": _upstream_bin(), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "after 2 attempts" in out.stdout and "HttpStatusError status=409" in out.stdout


def test_live_example_runs():
    out = subprocess.run(
        [sys.executable, str(REPO / "examples" / "python" / "live.py")],
        env={"HARNESS_UPSTREAM_BIN": _upstream_bin(), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "lines ['data: Hel', 'data: lo', 'data: [DONE]']" in out.stdout and "reload rejected: services.llm.retry" in out.stdout
    assert "event: config_reloaded" in out.stdout and "watch: " in out.stdout and "async stream: [b'a', b'b']" in out.stdout
    assert "log: INFO POST llm /s/tokens/v1/generate -> 200" in out.stderr
