"""How kiln reaches a host when ssh itself fails: testinfra's ssh backend raises RuntimeError carrying the result
when ssh exits 255 (testinfra/backend/ssh.py, SshBackend.run_ssh; ssh(1): "ssh exits with the exit status of the
remote command or with 255 if an error occurred"). The fake host below is a test double of that behaviour."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from kiln.verify import hosts
from kiln.verify.hosts import TestinfraRemote


@dataclass
class _Out:
    rc: int
    stdout_bytes: bytes = b""
    stderr_bytes: bytes = b""


@dataclass
class _SshHost:
    """Test double of a testinfra host over ssh: answers from a script of results, raising on rc 255 as
    SshBackend.run_ssh does."""

    script: list[_Out]
    commands: list[str] = field(default_factory=list)

    def run(self, command: str) -> _Out:
        self.commands.append(command)
        out = self.script.pop(0)
        if out.rc == 255:
            raise RuntimeError(out)
        return out


def remote(script: list[_Out]) -> tuple[TestinfraRemote, _SshHost]:
    r = TestinfraRemote("oss02", "local://")
    fake = _SshHost(script)
    r.host = fake
    return r, fake


@pytest.fixture(autouse=True)
def _no_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("kiln.verify.hosts.time.sleep", lambda _s: None)


def test_a_host_that_is_booting_is_tried_again_until_sshd_answers() -> None:
    refused = _Out(255, stderr_bytes=b"ssh: connect to host 10.89.10.6 port 22: Connection refused\r\n")
    r, fake = remote([refused, refused, _Out(0, b"12\n")])
    res = r.run("ps -o etimes= -p 1", 30)
    assert res.ok and res.stdout == "12\n"
    assert len(fake.commands) == 3


@pytest.mark.parametrize("message", [b"Connection to 10.89.10.6 closed by remote host.\r\n",
                                     b"client_loop: send disconnect: Connection reset by peer\r\n"])
def test_ssh_failing_after_the_session_opened_is_a_result_not_a_retry(message: bytes) -> None:
    """A dropped session may have run the command: it is reported (rc 255, ssh's message), never run twice."""
    r, fake = remote([_Out(255, stderr_bytes=message)])
    res = r.run("pcs resource move lab-OST0002 oss02", 30)
    assert res.rc == 255 and res.stderr == message.decode()
    assert len(fake.commands) == 1


def test_a_banner_exchange_that_fails_is_tried_again() -> None:
    """sshd not accepting yet (early boot): the connection closes before a session exists."""
    early = _Out(255, stderr_bytes=b"kex_exchange_identification: Connection closed by remote host\r\n"
                                   b"Connection closed by 10.89.10.6 port 22\r\n")
    r, fake = remote([early, _Out(0, b"3\n")])
    assert r.run("ps -o etimes= -p 1", 30).ok
    assert len(fake.commands) == 2


def test_a_host_that_never_answers_gives_up_with_ssh_s_message() -> None:
    down = _Out(255, stderr_bytes=b"ssh: connect to host 10.89.10.6 port 22: No route to host\r\n")
    r, fake = remote([down] * hosts.SSH_CONNECT_TRIES)
    res = r.run("true", 30)
    assert res.rc == 255 and "No route to host" in res.stderr
    assert len(fake.commands) == hosts.SSH_CONNECT_TRIES


def test_a_remote_command_s_own_failure_is_returned_at_once() -> None:
    r, fake = remote([_Out(1, stderr_bytes=b"Connection refused by the S3 endpoint\n")])
    assert r.run("curl -f http://s3", 30).rc == 1
    assert len(fake.commands) == 1
