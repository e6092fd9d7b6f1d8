"""TEST DOUBLE: a loopback HTTP proxy in front of the tests' real SeaweedFS S3 gateway that injects faults.

It forwards every request unchanged (the Host header included, so SigV4 signatures still verify upstream) and,
for the requests a rule matches, answers instead as S3 documents for its errors or damages what the gateway sent:
- "503": HTTP 503 with the S3 error document `SlowDown` ("Please reduce your request rate"; AWS S3 API Reference,
  "Error responses": 503 SlowDown is retried by clients);
- "403": HTTP 403 with `AccessDenied` (a key a bucket policy denies; not retried);
- "reset": the connection is reset without an answer (a gateway restart, a load balancer dropping it);
- "corrupt": the body is forwarded with some bytes flipped and its length kept (bit rot in transit; HTTP gives
  no checksum of its own);
- "truncate": the headers promise the whole body and the connection closes half way;
- "list": a ListObjectsV2 answer gains extra <Contents> entries (keys S3 allows, as any UTF-8 string, and
  SeaweedFS normalizes away: '..', a leading '/', a newline), encoded as the store encoded its own.
A rule applies `times` times (-1: until cleared). `down()` closes the listening socket (connection refused, a
lake outage) and `up()` opens it again on the same port. Bound to 127.0.0.1 only, and stopped by the fixture.
"""

from __future__ import annotations

import contextlib
import http.client
import re
import socket
import struct
import threading
import urllib.parse
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from xml.sax.saxutils import escape as xml_escape

SLOW_DOWN = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
             b"<Message>Please reduce your request rate.</Message></Error>")
ACCESS_DENIED = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>AccessDenied</Code>'
                 b"<Message>Access Denied</Message></Error>")


@dataclass
class Rule:
    method: str
    path: str  # a regular expression over the request's path and query
    action: str  # 503 | 403 | reset | corrupt | truncate | list
    times: int = 1
    keys: tuple[tuple[str, int, str], ...] = ()  # "list": (key, size, etag) to add


class FaultyS3:
    def __init__(self, upstream: str) -> None:
        u = urllib.parse.urlsplit(upstream)
        self.upstream = (u.hostname or "127.0.0.1", u.port or 80)
        self.rules: list[Rule] = []
        self.seen: list[tuple[str, str, int]] = []  # (method, path, bytes of body sent back)
        self.lock = threading.Lock()
        self.port = 0
        self.server: ThreadingHTTPServer | None = None
        self.up()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def add(self, rule: Rule) -> None:
        with self.lock:
            self.rules.append(rule)

    def clear(self) -> None:
        with self.lock:
            self.rules.clear()

    def take(self, method: str, path: str) -> Rule | None:
        with self.lock:
            for r in self.rules:
                if r.times != 0 and r.method == method and re.search(r.path, path):
                    r.times -= 1 if r.times > 0 else 0
                    return r
        return None

    def up(self) -> None:
        proxy = self

        class Handler(_Handler):
            owner = proxy

        server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        server.daemon_threads = True
        self.port = server.server_address[1]
        self.server = server
        threading.Thread(target=server.serve_forever, daemon=True).start()

    def down(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

    def stop(self) -> None:
        self.down()


class _Handler(BaseHTTPRequestHandler):
    owner: FaultyS3
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            out = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    self.rfile.readline()
                    return out
                out += self.rfile.read(size)
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _any(self) -> None:
        body = self._body()
        rule = self.owner.take(self.command, self.path)
        if rule is not None and rule.action in ("503", "403"):
            doc = SLOW_DOWN if rule.action == "503" else ACCESS_DENIED
            self._send(int(rule.action), [("Content-Type", "application/xml")], doc)
            return
        if rule is not None and rule.action == "reset":
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.close_connection = True
            self.connection.close()
            return
        headers = [(k, v) for k, v in self.headers.items() if k.lower() not in ("expect", "transfer-encoding")]
        if body or self.command in ("PUT", "POST"):
            headers = [(k, v) for k, v in headers if k.lower() != "content-length"] + [("Content-Length",
                                                                                       str(len(body)))]
        conn = http.client.HTTPConnection(*self.owner.upstream, timeout=60)
        try:
            conn.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
            for k, v in headers:
                conn.putheader(k, v)
            conn.endheaders(body or None)
            resp = conn.getresponse()
            data = resp.read()
            out = [(k, v) for k, v in resp.getheaders() if k.lower() not in ("transfer-encoding", "connection")]
        finally:
            conn.close()
        self._answer(rule, resp.status, out, data)

    def _answer(self, rule: Rule | None, status: int, headers: list[tuple[str, str]], data: bytes) -> None:
        if rule is not None and rule.action == "corrupt" and len(data) > 16:
            mid = len(data) // 2
            data = data[:mid] + bytes(b ^ 0xFF for b in data[mid : mid + 16]) + data[mid + 16 :]
        if rule is not None and rule.action == "list":
            data = _with_keys(data, rule.keys)
        if rule is not None and rule.action == "truncate":
            self._send(status, headers, data[: len(data) // 2], length=len(data))
            self.close_connection = True
            return
        self._send(status, headers, data, head=self.command == "HEAD")

    def _send(self, status: int, headers: list[tuple[str, str]], data: bytes, length: int | None = None,
              head: bool = False) -> None:
        self.send_response(status)
        for k, v in headers:
            if k.lower() != "content-length" or head:
                self.send_header(k, v)
        if not head:
            self.send_header("Content-Length", str(length if length is not None else len(data)))
        self.end_headers()
        if not head:
            with contextlib.suppress(OSError):
                self.wfile.write(data)
        with self.owner.lock:
            self.owner.seen.append((self.command, self.path, 0 if head else len(data)))

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _any


def _with_keys(xml: bytes, keys: tuple[tuple[str, int, str], ...]) -> bytes:
    """The listing with more entries, url-encoded where the store said it encoded its keys, else XML-escaped."""
    encoded = b"<EncodingType>url</EncodingType>" in xml

    def key(k: str) -> str:
        return urllib.parse.quote(k, safe="") if encoded else xml_escape(k)

    entries = "".join(
        f"<Contents><Key>{key(k)}</Key><Size>{size}</Size><ETag>&quot;{etag}&quot;</ETag>"
        f"<LastModified>2026-01-01T00:00:00.000Z</LastModified><StorageClass>STANDARD</StorageClass></Contents>"
        for k, size, etag in keys
    )
    return xml.replace(b"</ListBucketResult>", entries.encode() + b"</ListBucketResult>")
