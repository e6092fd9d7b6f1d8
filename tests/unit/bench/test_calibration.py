"""bench/calibration: the sizing model against published measurements, within ±20 % (it only plans)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]


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


def _copy_storage_case(tmp_path: Path, **top: object) -> tuple[Path, dict]:
    doc = yaml.safe_load((cal.CASES / "io500-ddn-ai400x2-one.yaml").read_text())
    doc.update(top)
    return tmp_path, doc


def _write(tmp_path: Path, doc: dict) -> Path:
    (tmp_path / "case.yaml").write_text(yaml.safe_dump(doc))
    return tmp_path


def test_a_figure_in_gib_is_compared_in_gb() -> None:
    rows = {r.case: r for r in cal.load_case(cal.CASES / "io500-ddn-ai400x2-one.yaml")}
    read = rows["io500-isc23-ai400x2-1-easy-read"]
    assert read.unit == "GiB/s" and read.published == pytest.approx(79.078239)
    assert read.published_GBps == pytest.approx(79.078239 * 2**30 / 1e9)
    assert read.ratio == pytest.approx(read.predicted / read.published_GBps)
    assert read.limit == "oss_servers"  # the appliance's published ceiling sets it


def test_a_figure_set_by_a_placeholder_layer_is_off(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d, doc = _copy_storage_case(tmp_path)
    doc["assumed_layers"] = [*doc["assumed_layers"], "oss_servers"]
    assert cal.main(["--cases", str(_write(d, doc))]) == 1
    assert "OFF: set by oss_servers, a placeholder layer" in capsys.readouterr().out


def test_placeholder_layers_need_a_reason(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d, doc = _copy_storage_case(tmp_path)
    del doc["assumed_reason"]
    assert cal.main(["--cases", str(_write(d, doc))]) == 2
    assert "assumed_reason" in capsys.readouterr().err


def test_an_unknown_unit_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d, doc = _copy_storage_case(tmp_path)
    doc["measurements"][0]["unit"] = "TB/h"
    assert cal.main(["--cases", str(_write(d, doc))]) == 2
    assert "TB/h" in capsys.readouterr().err


def test_storage_cases_are_in_the_set() -> None:
    rows = [r for f in sorted(cal.CASES.glob("*.yaml")) for r in cal.load_case(f)]
    storage = [r for r in rows if r.metric.startswith("sizing:")]
    judged = [r for r in storage if not r.out_of_scope]
    assert len(storage) >= 6 and len(judged) >= 4
    assert all(r.limit and not r.assumed for r in judged)
