"""TEST DOUBLE inside: kiln-health's Kubernetes side (kiln.node.health.KubeApi, reconcile_node) against FakeApiServer, a
test double of the API server on 127.0.0.1 (plain HTTP, the same requests the DaemonSet makes over HTTPS)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from kiln.node import health
from kiln.node.health import (
    CORDONED_ANNOTATION,
    REASON_ANNOTATION,
    TAINT_KEY,
    KubeApi,
    KubeError,
    Result,
    reconcile_node,
)

TOKEN = "test-token-not-a-secret"
FAULT = Result("health.rdma", "fault", "mlx5_0 port 1 is 1: DOWN", 21)


def _merge(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch, as the API server applies application/merge-patch+json."""
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = _merge(out.get(k), v)
    return out


class FakeApiServer:
    """TEST DOUBLE: the Kubernetes API server's node GET/PATCH and event POST, with bearer-token checks, RBAC
    (only what the kiln-health ClusterRole and Role grant) and resourceVersion preconditions."""

    def __init__(self, node: dict[str, Any]) -> None:
        self.node = node
        self.events: list[dict[str, Any]] = []
        self.requests: list[tuple[str, str]] = []
        self.conflicts = 0  # answer this many PATCHes with 409 after changing the node behind the client's back
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _answer(self, code: int, doc: dict[str, Any]) -> None:
                body = json.dumps(doc).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _handle(self) -> None:
                fake.requests.append((self.command, self.path))
                if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                    return self._answer(401, {"message": "Unauthorized"})
                name = fake.node["metadata"]["name"]
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                if self.path == f"/api/v1/nodes/{name}" and self.command == "GET":
                    return self._answer(200, fake.node)
                if self.path == f"/api/v1/nodes/{name}" and self.command == "PATCH":
                    if self.headers.get("Content-Type") != "application/merge-patch+json":
                        return self._answer(415, {"message": "unsupported media type"})
                    if fake.conflicts:
                        fake.conflicts -= 1
                        fake._bump()
                        return self._answer(409, {"message": "the object has been modified"})
                    want = (body or {}).get("metadata", {}).get("resourceVersion")
                    if want is not None and want != fake.node["metadata"]["resourceVersion"]:
                        return self._answer(409, {"message": "the object has been modified"})
                    fake.node = _merge(fake.node, body)
                    fake._bump()
                    return self._answer(200, fake.node)
                if self.path == "/api/v1/namespaces/kiln-health/events" and self.command == "POST":
                    fake.events.append(body or {})
                    return self._answer(201, body or {})
                return self._answer(403, {"message": f"{self.command} {self.path} is forbidden"})

            do_GET = do_PATCH = do_POST = do_DELETE = do_PUT = _handle

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def _bump(self) -> None:
        meta = self.node["metadata"]
        meta["resourceVersion"] = str(int(meta["resourceVersion"]) + 1)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _node(unschedulable: bool = False, taints: list[dict[str, str]] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"taints": taints or [{"key": "nvidia.com/gpu", "value": "present",
                                                  "effect": "NoSchedule"}]}
    if unschedulable:
        spec["unschedulable"] = True
    return {"apiVersion": "v1", "kind": "Node", "spec": spec,
            "metadata": {"name": "gpu001", "uid": "uid-1", "resourceVersion": "7", "annotations": {}}}


@pytest.fixture
def token(tmp_path: Path) -> Path:
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n")
    return path


@pytest.fixture
def server() -> Iterator[FakeApiServer]:
    s = FakeApiServer(_node())
    yield s
    s.close()


def _ours(node: dict[str, Any]) -> list[dict[str, str]]:
    return [t for t in node["spec"].get("taints", []) if t["key"] == TAINT_KEY]


def test_fault_cordons_taints_and_records_the_reason_then_health_returns_the_node(
        server: FakeApiServer, token: Path) -> None:
    api = KubeApi(server.url, token)
    done = reconcile_node(api, "gpu001", FAULT, "kiln-health")
    assert done and "fault-21" in done
    node = server.node
    assert node["spec"]["unschedulable"] is True
    assert _ours(node) == [{"key": TAINT_KEY, "value": "fault-21", "effect": "NoSchedule"}]
    assert {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"} in node["spec"]["taints"]
    assert node["metadata"]["annotations"][REASON_ANNOTATION] == "health.rdma: FAULT 21: mlx5_0 port 1 is 1: DOWN"
    assert node["metadata"]["annotations"][CORDONED_ANNOTATION] == "true"
    (event,) = server.events
    assert event["involvedObject"] == {"apiVersion": "v1", "kind": "Node", "name": "gpu001", "uid": "uid-1"}
    assert event["type"] == "Warning" and event["reason"] == "KilnHealthFault" and "FAULT 21" in event["message"]
    # the same fault again: nothing to change, no second event
    assert reconcile_node(api, "gpu001", FAULT, "kiln-health") is None and len(server.events) == 1
    # healthy: taint, annotations and kiln-health's own cordon go; the GPU taint stays
    assert reconcile_node(api, "gpu001", None, "kiln-health")
    node = server.node
    assert node["spec"]["unschedulable"] is False and not _ours(node)
    assert node["spec"]["taints"] == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    assert node["metadata"]["annotations"] == {}
    assert server.events[-1]["type"] == "Normal" and server.events[-1]["reason"] == "KilnHealthRecovered"
    assert reconcile_node(api, "gpu001", None, "kiln-health") is None  # healthy and clean: no request but GET
    assert server.requests[-1] == ("GET", "/api/v1/nodes/gpu001")


def test_an_operators_cordon_is_never_undone(token: Path) -> None:
    server = FakeApiServer(_node(unschedulable=True))
    try:
        api = KubeApi(server.url, token)
        assert reconcile_node(api, "gpu001", None, "kiln-health") is None  # not ours: untouched
        assert server.node["spec"]["unschedulable"] is True and not server.events
        reconcile_node(api, "gpu001", FAULT, "kiln-health")  # a fault on a cordoned node: taint, no cordon claim
        assert _ours(server.node) and CORDONED_ANNOTATION not in server.node["metadata"]["annotations"]
        reconcile_node(api, "gpu001", None, "kiln-health")
        assert not _ours(server.node) and server.node["spec"]["unschedulable"] is True  # still the operator's
    finally:
        server.close()


def test_a_new_fault_code_replaces_the_old_taint_and_a_conflict_is_retried(server: FakeApiServer,
                                                                          token: Path) -> None:
    api = KubeApi(server.url, token)
    reconcile_node(api, "gpu001", FAULT, "kiln-health")
    server.conflicts = 1
    reconcile_node(api, "gpu001", Result("health.lustre", "fault", "no Lustre mount at /lustre", 30), "kiln-health")
    assert _ours(server.node) == [{"key": TAINT_KEY, "value": "fault-30", "effect": "NoSchedule"}]
    assert server.node["metadata"]["annotations"][CORDONED_ANNOTATION] == "true"
    assert [m for m, _ in server.requests].count("PATCH") == 3  # first fault, the 409, the retry


def test_api_errors_name_the_request_and_the_fix(server: FakeApiServer, token: Path, tmp_path: Path) -> None:
    with pytest.raises(KubeError, match=r"GET /api/v1/nodes/gpu999: 403 .*ClusterRole kiln-health"):
        reconcile_node(KubeApi(server.url, token), "gpu999", FAULT, "kiln-health")
    bad = tmp_path / "bad"
    bad.write_text("wrong")
    with pytest.raises(KubeError, match="401 Unauthorized"):
        reconcile_node(KubeApi(server.url, bad), "gpu001", FAULT, "kiln-health")
    with pytest.raises(KubeError, match=r"GET /api/v1/nodes/gpu001: .*refused"):
        reconcile_node(KubeApi("http://127.0.0.1:9", token), "gpu001", FAULT, "kiln-health")


def test_main_outside_a_pod_says_so_without_a_traceback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    expect = tmp_path / "gpu001.json"
    expect.write_text(json.dumps({"host": "gpu001", "gpus": 0, "rdma": {}, "lustre_mount": "/lustre",
                                  "server_nids": []}))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert health.main(["--expect", str(expect), "--kubernetes"]) == 2
    assert "not in a Kubernetes pod" in capsys.readouterr().err


def test_main_in_a_pod_reads_the_host_under_root_and_takes_the_node_out(
        server: FakeApiServer, token: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    host = tmp_path / "host"
    (host / "proc/1").mkdir(parents=True)
    (host / "proc/1/mounts").write_text("overlay / overlay rw 0 0\n")  # init's mounts: no NVMe scratch
    (host / "proc/mounts").write_text("tmpfs /mnt/local-nvme tmpfs rw 0 0\n")  # a pod's own: must not count
    expect = tmp_path / "gpu001.json"
    expect.write_text(json.dumps({"host": "gpu001", "gpus": 0, "rdma": {}, "lustre_mount": "/lustre",
                                  "server_nids": [], "nvme_mount": "/mnt/local-nvme"}))
    monkeypatch.setattr(KubeApi, "in_cluster", classmethod(lambda cls: KubeApi(server.url, token)))
    monkeypatch.setattr(health, "_namespace", lambda: "kiln-health")
    monkeypatch.setenv("NODE_NAME", "gpu001")
    monkeypatch.setattr(health, "run", lambda argv: None)  # no tool in the pod (timedatectl, nvidia-smi, lnetctl)
    monkeypatch.setattr(health, "adjtimex_maxerror_us", lambda: 2_000)  # the kernel clock: synchronised
    assert health.main(["--expect", str(expect), "--kubernetes", "--root", str(host)]) == 60
    out = capsys.readouterr().out
    assert "health.nvme: FAULT 60: nothing mounted at /mnt/local-nvme" in out
    assert "health.clock: OK: adjtimex maxerror 2000 µs" in out
    assert "node gpu001: kiln-health cordoned" in out
    assert server.node["spec"]["unschedulable"] is True and _ours(server.node)[0]["value"] == "fault-60"


def test_removing_the_cordon_annotation_makes_the_cordon_the_operators(server: FakeApiServer, token: Path) -> None:
    """The runbook's step: without kiln.io/health-cordoned, recovery removes only kiln-health's taint."""
    api = KubeApi(server.url, token)
    reconcile_node(api, "gpu001", FAULT, "kiln-health")
    del server.node["metadata"]["annotations"][CORDONED_ANNOTATION]
    assert reconcile_node(api, "gpu001", FAULT, "kiln-health") is None  # still faulty: no new claim
    reconcile_node(api, "gpu001", None, "kiln-health")
    assert server.node["spec"]["unschedulable"] is True and not _ours(server.node)


def test_a_pod_that_cannot_read_the_hosts_mount_table_never_reports_a_mount_fault(tmp_path: Path) -> None:
    """hidepid on the host's /proc hides /proc/1: the pod's own /proc/mounts must not stand in for the host's."""
    host = tmp_path / "host"
    (host / "proc/self").mkdir(parents=True)  # a real procfs, without a readable /proc/1
    (host / "proc/mounts").write_text("overlay / overlay rw 0 0\n")
    (host / "sys/fs/lustre").mkdir(parents=True)
    e = health.Expect(host="gpu001", gpus=0, rdma={}, lustre_mount="/lustre", server_nids=[],
                      nvme_mount="/mnt/local-nvme")
    res = {r.check: r for r in health.run_checks(e, host, lambda argv: None, lambda: 2_000)}
    for check in ("health.lustre", "health.nvme"):
        assert res[check].status == "not_applicable" and "hidepid" in res[check].detail, res[check]
