"""Support code for the tests of kiln's Lustre Ansible modules.

Parsers are tested on text fixtures under fixtures/: the tool's output only, with NAME.cmd beside it
(a run of fixtures/regen-blkid.sh) or NAME.source (where published output comes from, or the source
code a format example was written from). Modules are run for real through the ``ansible`` CLI
(AnsiballZ packaging, module_utils import, check mode, diff) against
localhost, with the fake tools under doubles/ standing in for Lustre.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
MODULES = REPO / "plugins" / "modules"
MODULE_UTILS = REPO / "plugins" / "module_utils"
# ansible/collections/ansible_collections/kiln/cluster links to the repository root (the collection root).
COLLECTIONS = REPO / "ansible" / "collections"
DOUBLES = HERE / "doubles"
FIXTURES = HERE / "fixtures"
ANSIBLE = Path(sys.executable).parent / "ansible"


def collection_env(home: Path) -> dict[str, str]:
    """Environment that resolves ``kiln.cluster.*`` from this checkout."""
    return {**os.environ, "ANSIBLE_HOME": str(home), "ANSIBLE_COLLECTIONS_PATH": str(COLLECTIONS)}


def load_fixture(name: str) -> str:
    """Fixture text, exactly the tool's output; NAME.cmd or NAME.source must say where it comes from."""
    path = FIXTURES / name
    assert path.with_suffix(".cmd").exists() or path.with_suffix(".source").exists(), f"{name}: no provenance"
    return path.read_text(encoding="utf-8")


def real_tool(name: str) -> str | None:
    """A util-linux/e2fsprogs tool from PATH or the sbin directories."""
    found = shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin:/usr/bin:/bin")
    return found


@dataclass
class Doubles:
    """The fake tools' shared state and call log for one test."""

    state_path: Path
    log_path: Path

    def tool(self, name: str) -> str:
        return str(DOUBLES / name)

    def state(self) -> dict[str, Any]:
        if not self.state_path.exists():
            return {}
        return json.loads(self.state_path.read_text(encoding="utf-8"))

    def set_state(self, **sections: Any) -> None:
        state = self.state()
        state.update(sections)
        self.state_path.write_text(json.dumps(state), encoding="utf-8")

    def calls(self, prog: str | None = None) -> list[list[str]]:
        if not self.log_path.exists():
            return []
        entries = [json.loads(line) for line in self.log_path.read_text(encoding="utf-8").splitlines()]
        return [entry["argv"] for entry in entries if prog is None or entry["prog"] == prog]

    def env(self) -> dict[str, str]:
        return {"KILN_DOUBLE_STATE": str(self.state_path), "KILN_DOUBLE_LOG": str(self.log_path)}


@dataclass
class ModuleRunner:
    """Runs one module (``kiln.cluster.<name>``) through ``ansible localhost -m``; returns the host's result."""

    tmp_path: Path
    doubles: Doubles

    def __call__(self, module: str, args: dict[str, Any], check: bool = False) -> dict[str, Any]:
        cmd = [
            str(ANSIBLE),
            "localhost",
            "-i",
            "localhost,",
            "-c",
            "local",
            "-m",
            module if "." in module else f"kiln.cluster.{module}",
            "-a",
            json.dumps(args),
            "-e",
            f"ansible_python_interpreter={sys.executable}",
            "--diff",
        ]
        if check:
            cmd.append("--check")
        proc = subprocess.run(cmd, env=self.env(), capture_output=True, text=True, timeout=120, check=False)
        try:
            report = json.loads(proc.stdout)
            return report["plays"][0]["tasks"][0]["hosts"]["localhost"]
        except (ValueError, KeyError, IndexError) as exc:
            raise AssertionError(f"no result from ansible: {proc.stdout}\n{proc.stderr}") from exc

    def env(self) -> dict[str, str]:
        home = self.tmp_path / "ansible-home"
        home.mkdir(exist_ok=True)
        config = self.tmp_path / "ansible.cfg"
        config.write_text("[defaults]\n", encoding="utf-8")
        env = dict(os.environ)
        env.update(self.doubles.env())
        env.update(
            {
                "ANSIBLE_CONFIG": str(config),
                "ANSIBLE_HOME": str(home),
                "ANSIBLE_LOCAL_TEMP": str(home / "tmp"),
                "ANSIBLE_REMOTE_TMP": str(home / "remote"),
                "ANSIBLE_COLLECTIONS_PATH": str(COLLECTIONS),
                "ANSIBLE_LOAD_CALLBACK_PLUGINS": "1",
                "ANSIBLE_STDOUT_CALLBACK": "json",
                "ANSIBLE_NOCOLOR": "1",
                "ANSIBLE_DEPRECATION_WARNINGS": "0",
                "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
            }
        )
        return env
