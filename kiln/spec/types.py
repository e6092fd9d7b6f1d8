"""Constrained string types for spec fields: each says what characters the thing it names may hold.

kiln renders spec values into shell scripts, systemd units, sysctl files, Ansible variables and
Kubernetes objects that run as root. Every string field of the spec therefore uses one of these
types (or a stricter pattern of its own), so that a value that could escape its quoting is refused
at load time with the field path, the value and the fix. Rendering still quotes what it inserts:
these types are the first of two walls, not the only one.

Shared rules (all types): no control characters (newline, tab, NUL, ESC, DEL, ...), no Jinja2
delimiters (``{{``, ``{%``, ``{#``) so Ansible never evaluates a spec value, and a length bound.
"""

from __future__ import annotations

import ipaddress
import posixpath
import re
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import AfterValidator, Field

#: C0/C1 controls, Unicode line and paragraph separators (YAML and some parsers break lines there), and the
#: invisible format characters that reorder or hide text (bidi overrides, zero-width, BOM).
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]")
_JINJA = re.compile(r"\{[{%#]|[}%#]\}")


def check_plain(value: str) -> str:
    """Refuse control characters and template delimiters in any spec string."""
    if _CONTROL.search(value):
        raise ValueError("control characters (newline, tab, NUL, ...) are not allowed; fix: write it on one line")
    if _JINJA.search(value):
        raise ValueError("'{{', '{%' and '{#' are not allowed (they would be evaluated as templates); fix: remove them")
    return value


#: The longest name of one directory entry, bytes (Linux <linux/limits.h> NAME_MAX; Lustre's limit is the same).
NAME_MAX = 255


def _canonical_path(value: str) -> str:
    """Absolute path, canonicalised ('//', '/.', trailing '/' removed), '..' refused."""
    check_plain(value)
    parts = value.split("/")
    if ".." in parts:
        raise ValueError("'..' is not allowed in a path; fix: write the absolute path without '..'")
    long = [p for p in parts if len(p.encode()) > NAME_MAX]
    if long:
        raise ValueError(
            f"the name {long[0][:32]}... is {len(long[0].encode())} bytes, longer than a file name may be "
            f"(NAME_MAX {NAME_MAX}: Linux <linux/limits.h>; ext4, ZFS and Lustre alike); fix: shorten each name "
            f"between '/' to at most {NAME_MAX} bytes"
        )
    canonical = posixpath.normpath(value)
    # normpath keeps a leading '//' (POSIX leaves it implementation-defined); kiln means '/'.
    return "/" + canonical.lstrip("/")


def _bucket(value: str) -> str:
    """S3 bucket naming rules (no '..', '.-', '-.', reserved prefixes/suffixes, not an IP address)."""
    check_plain(value)
    if ".." in value or ".-" in value or "-." in value:
        raise ValueError("adjacent '.'/'-' are not allowed in a bucket name (S3 naming rules); fix: remove them")
    if value.startswith("xn--") or value.endswith("-s3alias") or value.startswith("sthree-"):
        raise ValueError("reserved bucket-name prefix or suffix (S3 naming rules); fix: choose another name")
    try:
        ipaddress.IPv4Address(value)
    except ValueError:
        return value
    raise ValueError("a bucket name must not look like an IP address (S3 naming rules); fix: choose another name")


def _url(value: str) -> str:
    """An http(s) URL with a host, port 1-65535 if given, no user or password."""
    check_plain(value)
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("not an http(s) URL with a host; fix: write it like https://s3.example.com:443")
    try:
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"bad port ({exc}); fix: use a port between 1 and 65535") from exc
    if port is not None and not 1 <= port <= 65535:
        raise ValueError("port out of range; fix: use a port between 1 and 65535")
    if parts.username or parts.password:
        raise ValueError("credentials in a URL are not allowed; fix: give the secret through credentials_secret")
    return value


#: Free text (descriptions): printable, one line, no template delimiters.
Text = Annotated[str, Field(max_length=512), AfterValidator(check_plain)]

#: A lower-case name (pools, environments): letters, digits and '-', starting with a letter and not ending in '-'
#: (it becomes part of Kubernetes names and Ansible groups).
NAME_PATTERN = r"^[a-z]([a-z0-9-]{0,29}[a-z0-9])?$"
Name = Annotated[str, Field(pattern=NAME_PATTERN, description="lower-case name: letters, digits, '-'")]

#: A Kubernetes object name or namespace (DNS-1123 label: no leading or trailing '-').
K8sName = Annotated[str, Field(pattern=r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")]

#: A container image reference: [registry[:port]/]path with a tag, a digest or both
#: (registry.example.com:5000/hpc/kiln-datamover:0.1.0@sha256:<64 hex>); lower-case path, no spaces or quotes.
ImageRef = Annotated[str, Field(
    pattern=r"^([a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?(:[0-9]{1,5})?/)?[a-z0-9]+([._/-][a-z0-9]+)*"
            r"(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}(@sha256:[a-f0-9]{64})?|@sha256:[a-f0-9]{64})$",
    max_length=512,
)]

#: A Kubernetes label key or label/annotation value prefix such as nvidia.com/gpu.present.
_LABEL_KEY = r"^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
LabelKey = Annotated[str, Field(pattern=_LABEL_KEY)]

#: An RDMA device name as in /sys/class/infiniband (mlx5_0, rocep1s0f0, bnxt_re0).
RdmaDevice = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")]

#: A network interface name (IFNAMSIZ 16 incl. NUL; no '/' and not '.' or '..').
Interface = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,14}$")]

#: An absolute path, canonicalised ('//', '/.', trailing '/' removed), without '..' or whitespace.
AbsPath = Annotated[
    str,
    Field(pattern=r"^/[A-Za-z0-9._/@+:=,-]*$", max_length=4096),
    AfterValidator(_canonical_path),
]

def _mount_point(value: str) -> str:
    """Absolute path other than '/', canonicalised, '..' refused."""
    value = _canonical_path(value)
    if value == "/":
        raise ValueError("'/' cannot be a mount point; fix: name a directory such as /lustre")
    return value


#: A mount point: an absolute path other than '/'.
MountPoint = Annotated[
    str,
    Field(pattern=r"^/[A-Za-z0-9._/@+:=,-]*$", max_length=4096),
    AfterValidator(_mount_point),
]

#: A block device (or by-id link) under /dev.
DevicePath = Annotated[
    str,
    Field(pattern=r"^/dev/[A-Za-z0-9._/@+:=,-]+$", max_length=4096),
    AfterValidator(_canonical_path),
]

def _target_device(value: str) -> str:
    """A /dev path (canonicalised, '..' refused) or a zfs pool/dataset name."""
    return _canonical_path(value) if value.startswith("/") else check_plain(value)


#: What a Lustre target is formatted on: a block device under /dev, or (zfs) a pool/dataset name.
TargetDevice = Annotated[
    str,
    Field(
        pattern=r"^(/dev/[A-Za-z0-9._/@+:=,-]+|[A-Za-z][A-Za-z0-9_.:-]{0,254}(/[A-Za-z0-9_.:-]+)*)$", max_length=4096
    ),
    AfterValidator(_target_device),
]

#: An S3 bucket name (AWS general-purpose bucket naming rules).
BucketName = Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$"), AfterValidator(_bucket)]


def _no_parent_segment(value: str) -> str:
    if ".." in value.split("/"):
        raise ValueError("a '..' segment is not allowed; fix: write the prefix without '..'")
    return value


#: An object-key prefix inside a bucket ('' for the whole bucket); no leading '/'.
KeyPrefix = Annotated[
    str, Field(pattern=r"^([A-Za-z0-9_.=+-][A-Za-z0-9_.=+/-]{0,1023})?$"), AfterValidator(_no_parent_segment)
]

#: An http(s) URL whose port, if any, is in range (no quotes, spaces or shell characters).
Url = Annotated[str, Field(pattern=r"^[A-Za-z0-9._~:/?#\[\]@%+,=-]+$", max_length=2048), AfterValidator(_url)]

#: A user name on a Linux host (useradd's default NAME_REGEX, plus upper case).
UserName = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_-]{0,31}$")]

#: A secret's name (a Pulumi config key such as kiln:s3SecretKey, or an environment variable); never its value.
SecretName = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}(:[A-Za-z_][A-Za-z0-9_.-]{0,63})?$")]

#: A tuning override's value when it is a string: one word or a short list (sysctl triples, mount options);
#: no quotes, '$', '`', ';', '\\' or shell operators, so it stays one value in every file it lands in.
OverrideText = Annotated[str, Field(pattern=r"^[A-Za-z0-9 _.,:/=+@-]{0,256}$"), AfterValidator(check_plain)]

#: A tuning id (see docs/tuning.md); '*' matches several.
OverrideId = Annotated[str, Field(pattern=r"^[A-Za-z0-9_.*-]{1,128}$")]


def dns_name(text: str) -> str:
    """A DNS-1123 label from free text (pool names, directory paths): what Kubernetes object names are built from."""
    name = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")
    return name[:63].strip("-") or "root"


#: A model name from the hardware catalog (letters, digits, '-', '_', '.').
CatalogName = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")]

#: Data protection behind one Lustre target. ZFS: a vdev type (mirror, raidzN, draidN) or none;
#: ldiskfs: a Linux md RAID level, or "external" when a controller or appliance provides it.
ProtectionLevel = Literal[
    "none", "mirror", "raidz1", "raidz2", "raidz3", "draid1", "draid2", "draid3",
    "raid1", "raid5", "raid6", "raid10", "external",
]


def _regex(kind: object) -> str:
    """The pattern of a constrained type (Annotated[str, Field(pattern=...)])."""
    for meta in getattr(kind, "__metadata__", ()):
        for item in getattr(meta, "metadata", ()):
            if getattr(item, "pattern", None):
                return str(item.pattern)
    raise ValueError(f"{kind} has no pattern")


#: The pattern of each constrained type → what it means in words, for error messages.
PATTERN_HINTS: dict[str, str] = {
    _regex(Name): "lower-case letters, digits and '-', starting with a letter, not ending in '-', at most 31",
    _regex(K8sName): "a Kubernetes name (DNS-1123 label): a-z, 0-9 and '-', not starting or ending in '-'",
    _regex(LabelKey): "a Kubernetes label key such as nvidia.com/gpu.present",
    _regex(RdmaDevice): "an RDMA device name as in /sys/class/infiniband (letters, digits, '_', '-'), e.g. mlx5_0",
    _regex(Interface): "a network interface name (at most 15 of letters, digits, '_', '.', ':', '-'), e.g. ib0",
    _regex(AbsPath): "an absolute path of letters, digits and . _ / @ + : = , - (no spaces or shell characters)",
    _regex(DevicePath): "a device under /dev, e.g. /dev/disk/by-id/nvme-...",
    _regex(TargetDevice): "a device under /dev, or (zfs) a pool/dataset name such as lustre-ost0/ost0",
    _regex(BucketName): "an S3 bucket name: 3-63 of a-z, 0-9, '.' and '-', starting and ending with a letter or digit",
    _regex(KeyPrefix): "an object-key prefix of letters, digits and _ . = + - / (no leading '/', no '..' segment)",
    _regex(Url): "a URL such as https://s3.example.com:443 (no spaces, quotes or shell characters)",
    _regex(UserName): "a Linux user name (letters, digits, '_', '-')",
    _regex(SecretName): "a secret's name such as kiln:s3SecretKey (never the secret itself)",
    _regex(OverrideText): "one line of letters, digits, spaces and _ . , : / = + @ - (no quotes or shell characters)",
    _regex(OverrideId): "a tuning id from docs/tuning.md",
    _regex(CatalogName): "a model name from the hardware catalog (letters, digits, '_', '.', '-')",
}
