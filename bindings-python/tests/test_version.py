"""One version for the package and its native library; a library from another build is refused."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import harness


def test_package_and_native_library_share_one_version():
    assert harness.__version__ == harness._native.__version__
    assert harness.__version__.count(".") == 2


def test_a_native_library_from_another_build_is_refused(tmp_path: Path):
    src = Path(harness.__file__).parent
    dst = tmp_path / "harness"
    dst.mkdir()
    for f in src.iterdir():
        if f.name.startswith("_native"):
            os.symlink(f, dst / f.name)  # the real library, as installed
        elif f.suffix in (".py", ".pyi", ".typed"):
            shutil.copy(f, dst / f.name)
    (dst / "_version.py").write_text('__version__ = "0.0.0-other"\n')
    r = subprocess.run([sys.executable, "-c", "import harness"], cwd=tmp_path, capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(tmp_path)})
    assert r.returncode != 0
    assert "ImportError: harness-sdk 0.0.0-other: its native library" in r.stderr
    assert f"is version {harness.__version__}; reinstall harness-sdk" in r.stderr
