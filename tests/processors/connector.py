"""The reference connector (examples/processor-http) installed for a `kasir serve` subprocess, as pip would."""

from __future__ import annotations

import os
from pathlib import Path

CONNECTOR = Path(__file__).resolve().parents[2] / "examples" / "processor-http"


def install_connector(site: Path) -> str:
    """The connector as `pip install examples/processor-http` leaves it: importable, its entry point listed."""
    info = site / "kasir_processor_http-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: kasir-processor-http\nVersion: 0.1.0\n")
    pyproject = (CONNECTOR / "pyproject.toml").read_text()
    entry = pyproject.split('[project.entry-points."kasir.processors"]', 1)[1].strip().splitlines()[0]
    entry = entry.replace('"', "")  # TOML's string, as entry_points.txt writes it: http = module:create
    (info / "entry_points.txt").write_text(f"[kasir.processors]\n{entry}\n")
    return os.pathsep.join([str(site), str(CONNECTOR / "src"), os.environ.get("PYTHONPATH", "")])
