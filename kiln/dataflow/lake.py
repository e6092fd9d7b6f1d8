"""The lake side of bookkeeping: list a prefix with sizes and ETags, and verify a local file against an object.

boto3 lists and reads object heads; it moves no data (rclone does). An object's ETag is the MD5 of its bytes
when it was written in one part, and MD5-of-part-MD5s + '-<parts>' when written in parts (AWS S3 User Guide,
"Checking object integrity"); rclone stores the whole-object MD5 as x-amz-meta-md5chksum on multipart uploads.
"""

from __future__ import annotations

import base64
import hashlib
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

    # Timestamps stay the strings the store sent: kiln reads no LastModified, and botocore's date parsing is
    # most of its cost of listing a prefix (docs/benchmarks.md, "Data flow", re-sync).
    session = botocore.session.get_session()
    session.get_component("response_parser_factory").set_parser_defaults(timestamp_parser=str)
    return boto3.session.Session(botocore_session=session).client(
        "s3",
        endpoint_url=creds.endpoint,
        aws_access_key_id=creds.access_key_id,
        aws_secret_access_key=creds.secret_key,
        region_name=creds.region,
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 5, "mode": "standard"}),
    )


def list_prefix(s3: Any, bucket: str, prefix: str) -> Iterator[Obj]:
    """Every object under bucket/prefix (keys relative to the prefix), directory markers left out."""
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for o in page.get("Contents", []):
            rel = o["Key"][len(prefix) :]
            if rel and not rel.endswith("/"):
                yield Obj(rel, int(o["Size"]), o["ETag"].strip('"'))


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
