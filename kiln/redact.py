"""Keep credentials out of what kiln writes for people: log lines, status files, reports.

Two kinds of secret reach error messages: a signed URL (botocore puts the request's URL into
EndpointConnectionError and its kin; a presigned URL carries X-Amz-Credential and X-Amz-Signature, and one
with the legacy scheme AWSAccessKeyId and Signature, in its query string) and a secret value itself (the S3
secret key). `redact` drops the query string of every URL that carries a signature or credential and replaces
each registered secret; `RedactFilter` applies it to every record a logging handler emits, so no call site
has to remember it.
"""

from __future__ import annotations

import logging
import re
import threading

REDACTED = "<redacted>"

# A URL's query string that signs or authorizes a request (SigV4 presigned, SigV2 presigned, or a session token).
_SIGNED_QUERY = re.compile(
    r"\?[^\s\"'<>]*(?:X-Amz-Signature|X-Amz-Credential|X-Amz-Security-Token|Signature=|AWSAccessKeyId=)"
    r"[^\s\"'<>]*",
    re.IGNORECASE,
)
# Header-shaped credentials: an Authorization header, a credential scope with the access key.
_AUTH_HEADER = re.compile(r"(Authorization['\"]?\s*[:=]\s*['\"]?)[^'\"\n]+", re.IGNORECASE)

_secrets: set[str] = set()
_lock = threading.Lock()


def register_secret(value: str) -> None:
    """Replace this value wherever it appears in what `redact` sees from now on (short values are refused:
    replacing a 3-character string would garble every message)."""
    if len(value) >= 8:
        with _lock:
            _secrets.add(value)


def redact(text: str) -> str:
    """`text` without signed query strings, authorization headers or registered secrets."""
    text = _SIGNED_QUERY.sub(f"?{REDACTED}", text)
    text = _AUTH_HEADER.sub(rf"\g<1>{REDACTED}", text)
    with _lock:
        secrets = sorted(_secrets, key=len, reverse=True)
    for s in secrets:
        text = text.replace(s, REDACTED)
    return text


class RedactFilter(logging.Filter):
    """A handler filter: the record's message (arguments merged) and its traceback text, redacted."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg, record.args = redact(record.getMessage()), None
        if record.exc_info:
            record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
            record.exc_info = None
        return True
