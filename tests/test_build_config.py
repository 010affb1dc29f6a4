"""The configure step rejects unknown or contradictory backend requests with a clear message."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CMAKE = shutil.which("cmake") or str(Path(sys.executable).parent / "cmake")

# The source build's configure step: not there where the package was installed from a wheel
# (scripts/test_wheel.sh runs the suite with no cmake and no source tree).
pytestmark = pytest.mark.skipif(
    not Path(CMAKE).exists() or not (REPO / "CMakeLists.txt").exists(), reason="needs cmake and the source tree"
)


def configure(tmp_path: Path, *defines: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [CMAKE, "-S", str(REPO), "-B", str(tmp_path / "b"), *defines, f"-DPython_EXECUTABLE={sys.executable}"],
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.parametrize(
    ("defines", "message"),
    [
        (["-DGGML_VULKAN=on"], "GGML_VULKAN is not supported"),
        (["-DGGML_SYCL=ON"], "GGML_SYCL is not supported"),
        (["-DGGML_CUDA=on", "-DGGML_HIP=on"], "contradictory backends"),
        (["-DGGML_CPU=off"], "leaves no backend"),
        pytest.param(
            ["-DGGML_METAL=on"],
            "GGML_METAL needs macOS",
            marks=pytest.mark.skipif(sys.platform == "darwin", reason="Metal is valid on macOS"),
        ),
        (["-DGGML_CPU_ALL_VARIANTS=on"], "needs GGML_BACKEND_DL"),
        (["-DGGML_CUDAA=on"], "unknown llama.cpp option -DGGML_CUDAA"),
    ],
)
def test_bad_backend_requests_fail_configure(tmp_path: Path, defines: list[str], message: str):
    proc = configure(tmp_path, *defines)
    assert proc.returncode != 0
    assert message in proc.stdout + proc.stderr, (proc.stdout + proc.stderr)[-3000:]


def test_a_backend_option_lasts_one_configure(tmp_path: Path):
    """The build folder is shared between source builds: a backend asked for once must not be
    built again by a later configure that does not ask for it."""
    without_rpc = configure(tmp_path, "-DGGML_RPC=OFF")
    assert without_rpc.returncode == 0, without_rpc.stderr[-3000:]
    linked = [line for line in without_rpc.stdout.splitlines() if "pyllama-yield: linked" in line]
    assert linked and "ggml-rpc" not in linked[0]
    again = configure(tmp_path)  # same folder, no options: the defaults, RPC included
    assert again.returncode == 0, again.stderr[-3000:]
    linked = [line for line in again.stdout.splitlines() if "pyllama-yield: linked" in line]
    assert linked and "ggml-rpc" in linked[0]
