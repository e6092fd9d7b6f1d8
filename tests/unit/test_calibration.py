"""bench/calibration: the sizing model against published measurements, within ±20 % (it only plans)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


def _calibration() -> ModuleType:
    spec = importlib.util.spec_from_file_location("kiln_calibration", ROOT / "bench" / "calibration" / "run.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


cal = _calibration()


def test_every_published_case_is_within_the_band(capsys: pytest.CaptureFixture[str]) -> None:
    assert cal.main([]) == 0, capsys.readouterr().out
    out = capsys.readouterr().out
    assert "within ±20%" in out
    rows = [r for f in sorted(cal.CASES.glob("*.yaml")) for r in cal.load_case(f)]
    assert rows and all(r.source.startswith("http") for r in rows)


def _copy_case(tmp_path: Path, **change: object) -> Path:
    doc = yaml.safe_load((cal.CASES / "h100-2node-ndr400.yaml").read_text())
    doc["measurements"] = [{**doc["measurements"][0], **change}]
    (tmp_path / "case.yaml").write_text(yaml.safe_dump(doc))
    return tmp_path


def test_a_case_off_by_more_than_the_band_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cal.main(["--cases", str(_copy_case(tmp_path, published=1000))]) == 1
    assert "OFF" in capsys.readouterr().out


def test_an_out_of_scope_case_is_shown_not_judged(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = _copy_case(tmp_path, published=1000, out_of_scope="the model does not cover this")
    assert cal.main(["--cases", str(d)]) == 0
    assert "out of scope: the model does not cover this" in capsys.readouterr().out


def test_a_case_with_an_invalid_spec_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = yaml.safe_load((cal.CASES / "h100-2node-ndr400.yaml").read_text())
    doc["cluster"]["compute"]["pools"][0]["gpu"]["model"] = "h100-nope"
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(doc))
    assert cal.main(["--cases", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "bad.yaml" in err and "h100-nope" in err


def test_unknown_metric_names_the_choices(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cal.main(["--cases", str(_copy_case(tmp_path, metric="target:no.such_check"))]) == 2
    assert "target:<check id>" in capsys.readouterr().err
