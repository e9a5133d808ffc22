"""Installing the project prints no setuptools warnings, and a regular install ships every preset (issue #29).

A fresh copy of the sources (pyproject.toml, README.md and the package-dir folders) is installed twice with
this interpreter's pip into scratch folders (`--target`, so the project's own environment is not touched):
once regularly and once editable (`-e`, as scripts/venv.sh does). pip (26 here) shows each warning the
build backend raised as a `<file>:<line>: BuildBackendWarning: <summary>` line, even under `-q`; there must
be none, but for the one notice no pyproject.toml can avoid (EDITABLE_NOTICE). The regular install must
hold every file of every preset folder under zoo/saved/<preset>/ (a folder added later included), and the
editable one must map zoo.saved to the sources' saved/.

It builds with `--no-build-isolation --no-index`, without the network, so it uses this environment's
setuptools, which must be as new as pyproject.toml's build-system requires (older ones do not know the
warnings this test looks for, and the test is skipped).
"""

import importlib.metadata
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python 3.11

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
# One line per warning the backend raised: "<file>:<line>: <Category>: <summary>" (pip's BuildBackendWarning,
# or the category itself where a pip shows the backend's stderr). pip's own notes are "WARNING: ...".
WARNING_LINE = re.compile(r"^\s*\S.*?:\d+: (\w*Warning): (.*)$", re.MULTILINE)
# setuptools' InformationOnly note after an editable build that installs a meta path finder, which it does
# unless package-dir is exactly {"": <one folder>} holding every package ("Please be careful with folders
# in your working directory with the same name as your package"). Here package-dir maps zoo.layers to
# layers/, ...; only moving layers/, recipes/, datasets/ and saved/ under zoo/ (and package-dir
# {"" = "."}, a plain .pth of the repository root) removes it.
EDITABLE_NOTICE = "Editable installation."


def _version(text):
    return tuple(int(part) for part in re.findall(r"\d+", text)[:3])


def _skip_unless_able():
    try:
        from pip._vendor.pyproject_hooks import BuildBackendWarning  # noqa: F401
    except ImportError:
        pytest.skip("this pip does not show the build backend's warnings (no pyproject_hooks.BuildBackendWarning)")
    try:
        have = importlib.metadata.version("setuptools")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("no setuptools in this environment to build with (--no-build-isolation)")
    (requirement,) = [r for r in PYPROJECT["build-system"]["requires"] if r.startswith("setuptools")]
    need = re.search(r">=\s*([\d.]+)", requirement)
    if need and _version(have) < _version(need.group(1)):
        pytest.skip(f"setuptools {have} here; pyproject.toml builds with {requirement}")


def _copy_sources(destination):
    destination.mkdir()
    for name in ("pyproject.toml", PYPROJECT["project"]["readme"]):
        shutil.copy2(ROOT / name, destination / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    folders = {path.split("/")[0] for path in PYPROJECT["tool"]["setuptools"]["package-dir"].values()}
    for folder in sorted(folders):
        shutil.copytree(ROOT / folder, destination / folder, ignore=ignore)


def _pip_install(source, target, *editable):
    env = {key: value for key, value in os.environ.items() if key != "PYTHONWARNINGS"}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    command = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index",
               "--no-cache-dir", "--target", str(target), *editable, str(source)]
    result = subprocess.run(command, cwd=source.parent, env=env, capture_output=True, text=True, timeout=300)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    return [f"{category}: {summary}" for category, summary in WARNING_LINE.findall(output)]


def _presets(saved):
    return {
        folder.name: sorted(path.name for path in folder.iterdir() if path.is_file())
        for folder in saved.iterdir()
        if folder.is_dir() and folder.name != "__pycache__"
    }


@pytest.mark.slow
def test_install_prints_no_setuptools_warnings_and_ships_the_presets(tmp_path):
    _skip_unless_able()
    source = tmp_path / "src"
    _copy_sources(source)
    presets = _presets(source / "saved")
    assert len(presets) > 0

    warnings = _pip_install(source, tmp_path / "regular")
    assert warnings == [], "pip install . printed setuptools warnings:\n" + "\n".join(warnings)
    installed = tmp_path / "regular" / "zoo" / "saved"
    assert (installed / "__init__.py").is_file()
    assert _presets(installed) == presets, "the installed zoo/saved/ lacks preset files"

    warnings = _pip_install(source, tmp_path / "editable", "-e")
    others = [line for line in warnings if not line.endswith(f": {EDITABLE_NOTICE}")]
    assert others == [], "pip install -e . printed setuptools warnings:\n" + "\n".join(others)
    assert len(warnings) <= 1, warnings
    (finder,) = (tmp_path / "editable").glob("__editable___*_finder.py")
    spec = importlib.util.spec_from_file_location("_zoo_editable_finder", finder)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert Path(module.MAPPING["zoo.saved"]) == source / "saved"
