"""Redaction at the logging boundary (kiln/redact.py): no signed URL or registered secret reaches stderr or a
status file, however the message was built."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from kiln.cli.common import setup_logging
from kiln.dataflow import progress
from kiln.redact import REDACTED, redact, register_secret

SIGNED = ("http://127.0.0.1:1/lake?list-type=2&prefix=ds%2F&X-Amz-Algorithm=AWS4-HMAC-SHA256"
          "&X-Amz-Credential=kiln%2F20261127%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20261127T040000Z"
          "&X-Amz-Expires=300&X-Amz-SignedHeaders=host&X-Amz-Signature=0123456789abcdef0123456789abcdef")
SECRET = "unit-test-secret-value-42"


def test_a_signed_url_keeps_its_path_and_loses_its_query() -> None:
    text = redact(f'Could not connect to the endpoint URL: "{SIGNED}"')
    assert "X-Amz-Signature" not in text and "X-Amz-Credential" not in text and "kiln%2F" not in text
    assert f'"http://127.0.0.1:1/lake?{REDACTED}"' in text
    assert redact("http://h/b?AWSAccessKeyId=AK&Signature=x&Expires=1") == f"http://h/b?{REDACTED}"
    assert redact("http://h/b?list-type=2") == "http://h/b?list-type=2"  # an unsigned URL stays whole
    assert redact("Authorization: AWS4-HMAC-SHA256 Credential=AK/x") == f"Authorization: {REDACTED}"


def test_no_signed_url_or_secret_reaches_stderr_or_a_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    setup_logging(debug=False)
    register_secret(SECRET)
    log = logging.getLogger("kiln.dataflow.test")
    log.error("listing failed: %s (secret %s)", SIGNED, SECRET)
    try:
        raise RuntimeError(f"EndpointConnectionError: {SIGNED}")
    except RuntimeError:
        log.error("pass failed", exc_info=True)
    err = capsys.readouterr().err
    assert "listing failed" in err and "pass failed" in err and "Traceback" in err
    assert "X-Amz-Signature" not in err and SECRET not in err


def test_a_status_file_never_holds_a_signed_url_or_secret(tmp_path: Path) -> None:
    register_secret(SECRET)
    st = progress.Status("corpus", "import", state="failed", error=f"{SIGNED} {SECRET}")
    progress.write(st, tmp_path, tmp_path / "prom")
    text = (tmp_path / "corpus.import.status.json").read_text()
    assert "X-Amz-Signature" not in text and SECRET not in text and REDACTED in text
