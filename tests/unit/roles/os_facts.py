"""Ansible's distribution facts of the platforms kiln supports, from their real release files.

Each tests/fixtures/os_facts/<host>.json holds the release files of one real host (/etc/os-release,
/etc/redhat-release, ..., copied verbatim from the source its <host>.source names) and the facts the roles
read. ``derive(release_files)`` runs Ansible's own collector (DistributionFactCollector, with the distro
library pointed at those files, as Ansible's unit tests feed it fixtures) and returns what a real
``ansible -m setup`` would report for them; the test checks that the stored facts are exactly that, so no
fact in a fixture is typed by hand except those its .source says are not derived (architecture).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

from ansible.module_utils import distro
from ansible.module_utils.facts.system import distribution

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "os_facts"

#: The distribution facts the roles and kiln's pre-flight read.
DISTRIBUTION_KEYS = ("os_family", "distribution", "distribution_major_version", "distribution_version",
                     "distribution_release")


@contextmanager
def _release_root(files: Mapping[str, str]) -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="kiln-os-facts-") as tmp:
        root = Path(tmp)
        for path, text in files.items():
            target = root / path.lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        yield root


def derive(release_files: Mapping[str, str]) -> dict[str, str]:
    """The distribution facts Ansible's DistributionFactCollector derives from these release files."""
    with _release_root(release_files) as root:
        linux = distro.LinuxDistribution(root_dir=str(root), include_lsb=False, include_uname=False,
                                         include_oslevel=False)

        def exists(path: str, allow_empty: bool = False) -> bool:
            target = root / path.lstrip("/")
            return target.is_file() and (allow_empty or target.stat().st_size > 0)

        def content(path: str, default: Any = None, strip: bool = True) -> Any:
            target = root / path.lstrip("/")
            if not target.is_file():
                return default
            text = target.read_text(encoding="utf-8")
            return text.strip() if strip else text

        def lines(path: str, strip: bool = True, line_sep: str | None = None) -> list[str]:
            text = content(path, default="", strip=strip)
            return text.splitlines() if text else []

        patches = [
            mock.patch.object(distribution, "_file_exists", exists),
            mock.patch.object(distribution, "get_file_content", content),
            mock.patch.object(distribution, "get_file_lines", lines),
            mock.patch.object(distribution, "get_uname", lambda module, flags=("-v",): None),
            mock.patch("platform.system", lambda: "Linux"),
        ]
        for name in ("id", "name", "version", "codename", "os_release_info", "lsb_release_info", "like"):
            patches.append(mock.patch.object(distro, name, getattr(linux, name)))
        for p in patches:
            p.start()
        try:
            facts = distribution.DistributionFactCollector().collect(module=mock.Mock())
        finally:
            for p in reversed(patches):
                p.stop()
    return {key: str(facts[key]) for key in DISTRIBUTION_KEYS}


def hosts() -> list[str]:
    """The recorded hosts, one per fixture file."""
    return sorted(p.stem for p in FIXTURES.glob("*.json"))


def load(host: str) -> dict[str, Any]:
    """One fixture: {release_files, facts}."""
    data: dict[str, Any] = json.loads((FIXTURES / f"{host}.json").read_text(encoding="utf-8"))
    return data
