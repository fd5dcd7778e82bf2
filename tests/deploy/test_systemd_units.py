"""The systemd units in deploy/systemd: valid for systemd, and consistent with the worker."""

import configparser
import shutil
import subprocess
from pathlib import Path

import pytest

from jobqueue.settings import DEFAULT_GRACE_SECONDS
from jobqueue.supervisor import EXIT_CONFIG, KILL_MARGIN_SECONDS

ROOT = Path(__file__).resolve().parents[2]
UNITS = ROOT / "deploy" / "systemd"


def unit(name: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read(UNITS / name)
    return parser


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze not here")
def test_units_pass_systemd_analyze_verify(tmp_path: Path) -> None:
    (tmp_path / "pauta.env").write_text("")
    installed = []
    for source in sorted(UNITS.glob("*.service")):
        text = source.read_text().replace("/opt/pauta", str(ROOT))
        target = tmp_path / source.name
        target.write_text(text.replace("/etc/pauta", str(tmp_path)))
        installed.append(str(target))
    result = subprocess.run(
        ["systemd-analyze", "verify", *installed], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == "", result.stderr  # verify only warns about some mistakes


def test_the_worker_unit_outlasts_the_grace_period_and_stops_on_bad_settings() -> None:
    service = unit("pauta-worker.service")["Service"]
    assert service["KillMode"] == "mixed"
    assert float(service["TimeoutStopSec"]) > DEFAULT_GRACE_SECONDS + KILL_MARGIN_SECONDS
    assert service["Restart"] == "always"
    assert service["RestartPreventExitStatus"] == str(EXIT_CONFIG)
    assert "worker.py" in service["ExecStart"]
