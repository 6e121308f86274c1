"""The default policy ships in the package: a wheel holds the repository's policies/*.yaml
(through the webhook/policy/defaults link), and a non-editable install explains a
workload from a directory with no policies/ in sight."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import orjson
import pytest

from tests.paths import POLICIES, ROOT


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                    "--wheel-dir", str(out), str(ROOT)], check=True, cwd=out,
                   capture_output=True)
    (built,) = out.glob("*.whl")
    return built


def test_the_wheel_ships_the_repositorys_policy_files(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as z:
        shipped = {Path(n).name: z.read(n) for n in z.namelist()
                   if n.startswith("webhook/policy/defaults/") and n.endswith(".yaml")}
    assert shipped == {p.name: p.read_bytes() for p in POLICIES.glob("*.yaml")}


def test_an_installed_airlock_explains_from_anywhere(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet", str(wheel)], check=True,
                   capture_output=True)
    work = tmp_path / "elsewhere"
    work.mkdir()
    example = ROOT / "examples" / "workloads" / "pytorchjob.yaml"
    done = subprocess.run([str(venv / "bin" / "airlock"), "explain", "-f", str(example),
                           "-o", "json"], capture_output=True, text=True, cwd=work,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert "using the default policy shipped with Airlock" in done.stderr
    assert str(venv) in done.stderr
    rows = [orjson.loads(line) for line in done.stdout.splitlines()]
    assert {(r["workload"], r["class"], r["gang"]["size"]) for r in rows} == {
        ("PyTorchJob/llama-finetune", "training", 4)}
