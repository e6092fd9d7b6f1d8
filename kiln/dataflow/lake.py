"""The lake side of bookkeeping: list a prefix with sizes and ETags, and verify a local file against an object.

boto3 signs the listings and reads object heads; it moves no data (rclone does). An object's ETag is the MD5
of its bytes when it was written in one part, and MD5-of-part-MD5s + '-<parts>' when written in parts (AWS S3
User Guide, "Checking object integrity"); rclone stores the whole-object MD5 as x-amz-meta-md5chksum on
multipart uploads.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import time
import urllib.parse
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CHUNK = 8 << 20


@dataclass(frozen=True, slots=True)
class Obj:
    key: str  # relative to the link's prefix
    size: int
    etag: str  # without quotes
    modified: str = ""  # LastModified as the store sent it (ISO 8601); parsed only where a conflict needs it


@dataclass(frozen=True, slots=True)
class Credentials:
    endpoint: str
    access_key_id: str
    secret_key: str
    region: str = "us-east-1"


def client(creds: Credentials) -> Any:
    import boto3  # type: ignore[import-untyped]  # imported here: only the mover needs it
    import botocore.session  # type: ignore[import-untyped]
    from botocore.config import Config  # type: ignore[import-untyped]

    # Timestamps stay the strings the store sent: kiln reads no LastModified, and botocore's date parsing
    # is most of what parsing an answer with many keys costs (docs/benchmarks.md, "Data flow", re-sync).
    session = botocore.session.get_session()
    session.get_component("response_parser_factory").set_parser_defaults(timestamp_parser=str)
    return boto3.session.Session(botocore_session=session).client(
        "s3",
        endpoint_url=creds.endpoint,
        aws_access_key_id=creds.access_key_id,
        aws_secret_access_key=creds.secret_key,
        region_name=creds.region,
        # SigV4 for presigned URLs too (list_prefix); botocore would presign with the legacy SigV2.
        config=Config(
            signature_version="s3v4",
            s3={"addressing_style": "path"},
            retries={"max_attempts": 5, "mode": "standard"},
        ),
    )


# The S3 2006-03-01 XML namespace of a ListObjectsV2 answer (AWS S3 API Reference, ListObjectsV2 "Response Syntax").
_NS = "{http://s3.amazonaws.com/doc/2006-03-01/}"
_PAGE_URL_EXPIRES_S = 300  # a page's signed URL is used once, right away


class ListError(RuntimeError):
    """The listing failed; `cause` names the error class that ended it (EndpointConnectionError, HTTP 503 …)."""

    def __init__(self, message: str, cause: str) -> None:
        super().__init__(message)
        self.cause = cause


def _text(el: ET.Element, tag: str) -> str:
    return el.findtext(_NS + tag) or el.findtext(tag) or ""


def list_prefix(s3: Any, bucket: str, prefix: str, dirs: bool = False) -> Iterator[Obj]:
    """Every object under bucket/prefix (keys relative to the prefix); directory markers (keys ending in '/') only
    with `dirs`.

    botocore signs each ListObjectsV2 page (a presigned URL: SigV4, the key stays in the client) and its HTTP
    pool sends it, but the page's XML is read here with ElementTree for the three fields kiln uses: botocore's
    generic parser builds a typed dict of every field of every key and took 3× as long for a prefix of 2000
    keys, which is most of a re-sync with nothing changed (docs/benchmarks.md, "Data flow"). Keys are asked
    url-encoded (encoding-type=url, as botocore asks) and decoded when the store says it encoded them."""
    http = s3._endpoint.http_session  # botocore's URLLib3Session: its pool, proxies and TLS settings
    token = ""
    while True:
        params: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix, "EncodingType": "url"}
        if token:
            params["ContinuationToken"] = token
        url = s3.generate_presigned_url("list_objects_v2", Params=params, ExpiresIn=_PAGE_URL_EXPIRES_S)
        body = _get(http, url)
        try:
            root = ET.fromstring(body)
        except ET.ParseError as exc:
            raise ListError(f"listing s3://{bucket}/{prefix}: the answer is not S3 XML ({exc})", "ParseError") from None
        encoded = _text(root, "EncodingType") == "url"
        for c in root.iter(_NS + "Contents"):
            key = _text(c, "Key")
            rel = (urllib.parse.unquote_plus(key) if encoded else key)[len(prefix) :]
            if rel and (dirs or not rel.endswith("/")):
                yield Obj(rel, int(_text(c, "Size") or 0), _text(c, "ETag").strip('"'), _text(c, "LastModified"))
        token = _text(root, "NextContinuationToken")
        if _text(root, "IsTruncated") != "true" or not token:
            return


def _get(http: Any, url: str) -> bytes:
    """GET a presigned URL through botocore's HTTP session, retrying what S3 asks to retry, with backoff; the body.

    Whatever ends it is a ListError naming the error class and the URL without its query string (the signature:
    kiln/redact.py)."""
    from botocore.awsrequest import AWSRequest  # type: ignore[import-untyped]
    from botocore.exceptions import BotoCoreError  # type: ignore[import-untyped]

    last, cause = "", ""
    for attempt in range(5):  # the client's own retries (lake.client: standard mode, 5 attempts)
        try:
            resp = http.send(AWSRequest(method="GET", url=url).prepare())
        except (BotoCoreError, OSError) as exc:  # connection refused or reset, DNS, timeouts
            last, cause = type(exc).__name__, type(exc).__name__
        else:
            if resp.status_code == 200:
                return bytes(resp.content)
            code = ""
            with contextlib.suppress(ET.ParseError):
                code = _text(ET.fromstring(resp.content), "Code")
            last, cause = f"HTTP {resp.status_code} {code}".strip(), code or f"HTTP {resp.status_code}"
            if resp.status_code < 500 and code not in ("SlowDown", "RequestTimeout"):
                break
        time.sleep(min(0.1 * 2**attempt, 2.0))
    raise ListError(f"listing {url.split('?', 1)[0]}: {last}", cause)


def error_class(exc: BaseException) -> str:
    """The class of the error behind `exc`: a ListError's cause, else the innermost exception's class name."""
    if isinstance(exc, ListError):
        return exc.cause
    while exc.__cause__ is not None:
        exc = exc.__cause__
    return type(exc).__name__


def head(s3: Any, bucket: str, key: str) -> dict[str, Any]:
    """The object's HEAD: its size, ETag, LastModified and user metadata."""
    return dict(s3.head_object(Bucket=bucket, Key=key))


def file_md5(path: Path) -> bytes:
    h = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
    return h.digest()


def multipart_etag(path: Path, part_size: int) -> str:
    """The ETag S3 gives an object uploaded from this file in parts of part_size bytes."""
    digests = []
    with open(path, "rb") as f:
        while chunk := f.read(part_size):
            digests.append(hashlib.md5(chunk, usedforsecurity=False).digest())
    return f"{hashlib.md5(b''.join(digests), usedforsecurity=False).hexdigest()}-{len(digests)}"


def is_md5_etag(etag: str) -> bool:
    """Whether an ETag is the object's MD5 (32 hex digits: written in one part), not a multipart ETag."""
    return len(etag) == 32 and all(c in "0123456789abcdef" for c in etag.lower())


def verify(s3: Any, bucket: str, key: str, path: Path, etag: str) -> tuple[bool, str]:
    """Whether the local file holds the object's bytes, by checksum; (ok, how it was decided)."""
    if "-" not in etag:
        ok = file_md5(path).hex() == etag
        return ok, "md5 = ETag" if ok else f"md5 {file_md5(path).hex()} ≠ ETag {etag}"
    head = s3.head_object(Bucket=bucket, Key=key)
    stored = head.get("Metadata", {}).get("md5chksum")
    if stored:
        ok = base64.b64encode(file_md5(path)).decode() == stored
        return ok, "md5 = x-amz-meta-md5chksum" if ok else "md5 ≠ x-amz-meta-md5chksum"
    size = path.stat().st_size
    parts = int(etag.rsplit("-", 1)[1])
    try:
        part = int(s3.head_object(Bucket=bucket, Key=key, PartNumber=1)["ContentLength"])
    except Exception:  # the store may not answer part heads
        part = size
    if part < size:
        candidates = [part]
    else:
        # The store ignored PartNumber (SeaweedFS 3.39 answers with the whole object). The part size P
        # satisfies ceil(size / P) = parts; writers use whole MiB (boto3 and the AWS CLI 8 MiB, rclone
        # 5 MiB, s5cmd 50 MiB), so try the whole-MiB sizes in that range, smallest first, at most 16.
        lo = -(-size // parts)
        hi = size // (parts - 1) if parts > 1 else size
        mib = 1 << 20
        candidates = [p for p in range(-(-lo // mib) * mib, hi + 1, mib) if -(-size // p) == parts][:16]
    for p in candidates:
        if multipart_etag(path, p) == etag:
            return True, f"multipart ETag recomputed with {p}-byte parts"
    return False, f"multipart ETag {etag} matches no part size tried ({len(candidates)} sizes)"
