"""The installed package: every package directory ships, nothing lands as a top-level `adapters`,
and the wheel installs beside AdapterHub's `adapters` (the same people use both) with both
importable and `inspector show` working."""

from __future__ import annotations

import json
import subprocess
import sys
import venv
from pathlib import Path

import pytest
import tomllib

from conftest import FIXTURES, ROOT

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
SETUPTOOLS = PYPROJECT["tool"]["setuptools"]


def _package_dirs() -> dict[str, Path]:
    """import name -> directory, for every directory holding an __init__.py."""
    out = {}
    for top, name in ((ROOT / "inspector", "inspector"), (ROOT / "adapters", "inspector.adapters")):
        for init in top.rglob("__init__.py"):
            rel = init.parent.relative_to(top).parts
            out[".".join((name, *rel))] = init.parent
    return out


def test_every_package_directory_is_listed_and_mapped():
    dirs = _package_dirs()
    assert sorted(SETUPTOOLS["packages"]) == sorted(dirs)
    mapping = SETUPTOOLS["package-dir"]
    for name, directory in dirs.items():
        if name.startswith("inspector.adapters"):
            assert (ROOT / mapping[name]).resolve() == directory.resolve(), name


def test_distribution_name_is_not_the_taken_one():
    # `inspector` on PyPI is an unrelated project; ckpt-inspector was free (pip download failed).
    assert PYPROJECT["project"]["name"] == "ckpt-inspector"


def _run(*argv: str | Path, cwd: Path | None = None, timeout: int = 600) -> str:
    proc = subprocess.run(
        [str(a) for a in argv], capture_output=True, text=True, cwd=cwd, timeout=timeout
    )
    assert proc.returncode == 0, f"{argv}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
    return proc.stdout


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    _run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", out, ROOT)
    (whl,) = out.glob("ckpt_inspector-*.whl")
    return whl


def test_wheel_has_no_top_level_adapters(wheel):
    import zipfile

    with zipfile.ZipFile(wheel) as z:
        tops = {n.split("/")[0] for n in z.namelist()}
        names = z.namelist()
    assert "adapters" not in tops
    assert "inspector" in tops
    assert "inspector/adapters/torch/zip_archive.py" in names
    assert any(n.startswith("inspector/schemes/") and n.endswith(".yaml") for n in names)


def test_installs_beside_adapterhub(wheel, tmp_path):
    """AdapterHub `adapters` (needs torch + transformers to import) and this wheel in one venv,
    installed in both orders of the two packages: each imports its own code, `inspector show`
    lists a real fixture, and uninstalling one leaves the other whole."""
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    py = env_dir / "bin" / "python"
    constraints = tmp_path / "constraints.txt"
    constraints.write_text("torch==2.13.0\n")  # the CPU wheel on disk; never a CUDA build
    pip = (py, "-m", "pip", "install", "-q", "-c", constraints)
    _run(*pip, "--no-deps", "adapters==1.3.0")  # first: the wheel must not clobber it
    _run(*pip, wheel)
    _run(*pip, "torch==2.13.0", "transformers~=4.57.0")
    probe = (
        "import json, adapters, inspector, inspector.adapters.registry as r\n"
        "print(json.dumps({'adapterhub': adapters.__file__, 'version': adapters.__version__,"
        " 'has_hub_api': hasattr(adapters, 'AutoAdapterModel'), 'ours': r.__file__}))"
    )
    found = json.loads(_run(py, "-c", probe, cwd=tmp_path).strip().splitlines()[-1])
    assert found["version"] == "1.3.0" and found["has_hub_api"]
    assert "/site-packages/adapters/" in found["adapterhub"]
    assert "/site-packages/inspector/adapters/" in found["ours"]
    out = _run(env_dir / "bin" / "inspector", "show", FIXTURES / "hf/gpt2_tiny/model.safetensors", "--format", "json")
    assert json.loads(out)["totals"]["tensors"] > 0
    assert _run(env_dir / "bin" / "inspector", "--version").startswith("inspector ")
    # removing AdapterHub leaves inspector whole, and the reverse
    _run(py, "-m", "pip", "uninstall", "-q", "-y", "adapters")
    _run(env_dir / "bin" / "inspector", "show", FIXTURES / "torch/seed001_model1.pt")
    _run(*pip, "--no-deps", "adapters==1.3.0")
    _run(py, "-m", "pip", "uninstall", "-q", "-y", "ckpt-inspector")
    _run(py, "-c", "import adapters; assert adapters.__version__ == '1.3.0'", cwd=tmp_path)


def test_every_architecture_names_a_scheme_that_loads():
    from inspector.formulas.core import archs
    from inspector.grouping import builtin_names, get_scheme

    named = {a.name: a.scheme for a in archs() if a.scheme is not None}
    assert named, "no architecture names a scheme"
    for arch, scheme in named.items():
        assert scheme in builtin_names(), (arch, scheme)
        assert get_scheme(scheme).groups, (arch, scheme)


def test_misspelt_scheme_is_refused_at_registration():
    from inspector.formulas.core import Arch, register

    with pytest.raises(ValueError, match="sockeye-rrn"):
        register(Arch(name="typo-arch", description="", hparams=(), predict=lambda h: [],
                      scheme="sockeye-rrn"))
