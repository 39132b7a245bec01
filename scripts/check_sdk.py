"""The SDK's release checks, run by `make test` (and `make lint`: compat only).

    python scripts/check_sdk.py compat [--src DIR]   # nothing newer than Python 3.10 in the SDK
    python scripts/check_sdk.py package              # sdist + wheel build, installed into a fresh venv

compat: ruff with sdk/pyproject.toml (target-version py310) refuses syntax newer than 3.10, and
`vermin -t=3.10-` refuses standard-library modules, members and arguments newer than 3.10.

package: `python -m build --no-isolation` builds the sdist and then the wheel from the sdist (so
the sdist is proved complete), with this venv's setuptools and wheel: no download. The wheel is
installed with `pip --no-index --no-deps` into a new venv that borrows this venv's httpx and
cryptography (a .pth line), then imported and its `kasir-client` command run there, isolated from
PYTHONPATH and from the editable install of the SDK.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import time
import venv
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SDK = ROOT / "sdk"
BIN = Path(sys.executable).parent
MIN_PYTHON = "3.10"


def run(*command: str | Path, env: dict[str, str] | None = None, cwd: Path | None = None) -> str:
    done = subprocess.run([str(c) for c in command], capture_output=True, text=True, env=env, cwd=cwd)
    if done.returncode != 0:
        sys.exit(f"check_sdk: {' '.join(map(str, command))} failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    return done.stdout


def compat(src: Path) -> None:
    # --config: the SDK's own rules (py310) also for a copy of its sources outside sdk/ (the test's).
    run(BIN / "ruff", "check", "--config", SDK / "pyproject.toml", src)
    run(BIN / "vermin", f"-t={MIN_PYTHON}-", "--no-tips", "--violations", "--eval-annotations", "-q", src)
    print(f"sdk compat: {src} needs nothing newer than Python {MIN_PYTHON}")


def _version() -> str:
    namespace: dict[str, str] = {}
    exec((SDK / "src/kasir_client/_version.py").read_text(), namespace)  # noqa: S102 (our own file)
    return namespace["__version__"]


def package() -> None:
    started = time.monotonic()
    version = _version()
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP")}
    with tempfile.TemporaryDirectory(prefix="kasir-sdk-") as tmp:
        out = Path(tmp, "dist")
        run(sys.executable, "-m", "build", "--no-isolation", "--outdir", out, SDK, env=clean)
        sdists, wheels = sorted(out.glob("*.tar.gz")), sorted(out.glob("*.whl"))
        if len(sdists) != 1 or len(wheels) != 1:
            sys.exit(f"check_sdk: expected one sdist and one wheel, got {sorted(p.name for p in out.iterdir())}")
        sdist, wheel = sdists[0], wheels[0]
        if f"-{version}" not in wheel.name or f"-{version}" not in sdist.name:
            sys.exit(f"check_sdk: {wheel.name} / {sdist.name} are not version {version}")
        with tarfile.open(sdist) as archive:
            names = {Path(*Path(n).parts[1:]).as_posix() for n in archive.getnames()}
        for needed in ("README.md", "pyproject.toml", "src/kasir_client/py.typed", "src/kasir_client/bodies.py"):
            if needed not in names:
                sys.exit(f"check_sdk: the sdist lacks {needed}")
        with zipfile.ZipFile(wheel) as archive:
            metadata = archive.read(f"kasir_client-{version}.dist-info/METADATA").decode()
            if "kasir_client/py.typed" not in archive.namelist():
                sys.exit("check_sdk: the wheel lacks kasir_client/py.typed")
        for line in (f"Requires-Python: >={MIN_PYTHON}", f"Version: {version}", "# kasir-client"):
            if line not in metadata:
                sys.exit(f"check_sdk: the wheel's METADATA lacks {line!r}")

        # A fresh venv without pip; this venv's pip installs into it, from the wheel file only.
        env_dir = Path(tmp, "venv")
        venv.EnvBuilder(with_pip=False).create(env_dir)
        python = env_dir / "bin" / "python"
        pip = (sys.executable, "-m", "pip", "--python", python)
        run(*pip, "install", "-q", "--no-index", "--no-deps", wheel, env=clean)
        purelib = run(python, "-I", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").strip()
        # The dependencies (httpx, cryptography) from this venv, appended after the venv's own packages:
        # a path given by a .pth line is not itself scanned for .pth files, so the editable install is not seen.
        Path(purelib, "_kasir_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
        probe = (
            "import pathlib, sys, kasir_client, kasir_client.bodies, httpx\n"
            f"assert kasir_client.__file__.startswith({str(env_dir)!r}), kasir_client.__file__\n"
            f"assert kasir_client.__version__ == {version!r}, kasir_client.__version__\n"
            f"assert kasir_client.USER_AGENT == 'kasir-client/{version}'\n"
            "assert (pathlib.Path(kasir_client.__file__).parent / 'py.typed').exists()\n"
            "print(kasir_client.__version__, sys.version.split()[0])\n"
        )
        installed = run(python, "-I", "-c", probe, env=clean).split()
        keys = Path(tmp, "keys")
        run(env_dir / "bin" / "kasir-client", "keygen", "--out", keys, env=clean)
        if not (keys / "private.pem").exists():
            sys.exit("check_sdk: the installed kasir-client keygen wrote no key")
    print(
        f"sdk package: {sdist.name} and {wheel.name} built, installed in a fresh venv and imported "
        f"(kasir-client {installed[0]} on Python {installed[1]}) in {time.monotonic() - started:.1f} s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    p = commands.add_parser("compat", help="nothing newer than Python 3.10 in the SDK's sources")
    p.add_argument("--src", type=Path, default=SDK / "src")
    commands.add_parser("package", help="sdist and wheel build, installed into a fresh venv")
    args = parser.parse_args()
    if args.command == "compat":
        compat(args.src)
    else:
        package()


if __name__ == "__main__":
    main()
