"""Support code for the tests of kiln's Lustre Ansible modules.

Parsers are tested on text fixtures under fixtures/: the tool's output only, with NAME.cmd beside it
(a run of fixtures/regen-blkid.sh) or NAME.source (where published output comes from, or the source
code a format example was written from). Modules run with the fake tools under doubles/ standing in for
Lustre, in one of two ways (ModuleRunner.via):

- ``python``: the module's ``main()`` in the test's process, with its arguments, check mode and diff passed
  the way Ansible passes them (ansible.module_utils.testing.patch_module_args) and the doubles' environment;
  the result is the JSON the module prints. For the tests about the module's decisions (about 0.02 s a run).
- ``ansible``: for real through the ``ansible`` CLI against localhost (AnsiballZ packaging, module_utils
  import from the collection, check mode, diff; about 1 s a run). Each module's first end-to-end test runs
  this way, and test_module_runner.py checks that both ways return the same result and make the same calls.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from unittest import mock

from ansible.module_utils import _internal as ansible_module_internal
from ansible.module_utils.common import warnings as ansible_module_warnings
from ansible.module_utils.testing import patch_module_args

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
    """Runs one module (``kiln.cluster.<name>``) in process or through ``ansible localhost -m`` (``via``);
    returns the host's result."""

    tmp_path: Path
    doubles: Doubles
    via: Literal["python", "ansible"] = "python"

    def __call__(self, module: str, args: dict[str, Any], check: bool = False) -> dict[str, Any]:
        name = module if "." in module else f"kiln.cluster.{module}"
        return self._in_process(name, args, check) if self.via == "python" else self._ansible(name, args, check)

    def _ansible(self, name: str, args: dict[str, Any], check: bool) -> dict[str, Any]:
        cmd = [
            str(ANSIBLE),
            "localhost",
            "-i",
            "localhost,",
            "-c",
            "local",
            "-m",
            name,
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

    def _in_process(self, name: str, args: dict[str, Any], check: bool) -> dict[str, Any]:
        """The module's main() here: the arguments as AnsibleModule reads them, the doubles' environment, and
        the result line exit_json/fail_json prints (they end with sys.exit). As in a module process, warnings
        and deprecations are collected for the result (not shown by a controller) and start empty each run."""
        if str(COLLECTIONS) not in sys.path:
            sys.path.append(str(COLLECTIONS))  # ansible_collections.kiln.cluster.* from this checkout
        collection, _, short = name.rpartition(".")
        assert collection == "kiln.cluster", f"{name}: only kiln.cluster modules run in process"
        module = importlib.import_module(f"ansible_collections.kiln.cluster.plugins.modules.{short}")
        params = {
            **args,
            "_ansible_check_mode": check,
            "_ansible_diff": True,
            "_ansible_remote_tmp": str(self._home() / "remote"),
        }
        out = io.StringIO()
        with (
            patch_module_args(params),
            mock.patch.object(ansible_module_internal, "is_controller", False),
            mock.patch.dict(ansible_module_warnings._global_warnings, clear=True),
            mock.patch.dict(ansible_module_warnings._global_deprecations, clear=True),
            mock.patch.dict(os.environ, self.env(), clear=True),
            contextlib.redirect_stdout(out),
            contextlib.suppress(SystemExit),
        ):
            module.main()
        lines = [line for line in out.getvalue().splitlines() if line.startswith("{")]
        if not lines:
            raise AssertionError(f"no result from {name}: {out.getvalue()}")
        result: dict[str, Any] = json.loads(lines[-1])
        result.setdefault("changed", False)  # as the controller reports a result without it
        if "warnings" in result:  # the controller reports each warning as its text
            result["warnings"] = [w["event"]["msg"] if isinstance(w, dict) else w for w in result["warnings"]]
        return result

    def _home(self) -> Path:
        home = self.tmp_path / "ansible-home"
        home.mkdir(exist_ok=True)
        return home

    def env(self) -> dict[str, str]:
        home = self._home()
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
