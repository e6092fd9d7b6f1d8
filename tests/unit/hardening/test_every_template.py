"""Every Jinja template of the roles and of the package, rendered with hostile values: nothing escapes.

Each template under roles/*/templates/ is rendered the way its role renders it: Ansible's Templar over
the role's defaults, the variables Ansible gives a host of a rendered inventory (`kiln inventory`, read
back with Ansible's own InventoryManager and VariableManager: group_vars, host_vars, groups, hostvars),
the role's vars, and the facts the role's tasks set before the template task (test doubles, FACTS
below, each computed the way the task computes it). Two inventories: the lab stack as rendered
(every variable defined), and the same inventory with a suffix on every spec-derived string: the worst
characters the spec's types accept in names and paths ("accepted"), and, as the second wall behind
them, what they refuse (quotes, `$(...)`, backticks, spaces, shell operators, globs: "hostile"). Per
output kind:

- shell scripts parse with `bash -n`, and the hostile command substitution appears only inside
  single quotes (a dropped `| quote` leaves it in the open or in double quotes, where it would run);
- systemd units, sysctl, nccl.conf, modprobe, corosync, crm, nftables, TOML and other line-based files
  keep the same directives: the hostile render has exactly the lines (by key) of the plain one;
- JSON and YAML outputs load, and every hostile value comes back unchanged.

The templates are enumerated from the tree, so a new template without a context here fails.
kiln/templates/ is rendered by kiln's own Jinja environment (kiln/render/report.py, kiln/verify/report.py)
and checked at the end of this module.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import tomllib
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible.inventory.manager import InventoryManager
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template
from ansible.vars.hostvars import HostVars
from ansible.vars.manager import VariableManager

from kiln.plan import build_plan
from kiln.render.inventory import render_inventory
from kiln.spec import load_stack
from tests.conftest import init_ansible_plugins

ROOT = Path(__file__).resolve().parents[3]
ROLE_TEMPLATES = sorted(p.relative_to(ROOT).as_posix() for p in ROOT.glob("roles/*/templates/*.j2"))
PACKAGE_TEMPLATES = sorted(p.relative_to(ROOT).as_posix() for p in ROOT.glob("kiln/templates/*.j2"))

#: What every spec-derived string gets appended in the hostile inventory. The marker is a command
#: substitution: in a shell script it must only ever appear inside single quotes.
MARKER = "$(touch PWNED)"
HOSTILE = f" a'b\"c{MARKER}`id`;x|y&z*?[<>]#"
#: The worst the spec's own types let through in a name or path (kiln/spec/types.py AbsPath, Interface,
#: RdmaDevice, KeyPrefix: '-', '.', '_', '@', '+', ':', '=', ','), appended the same way.
ACCEPTED = "-a.b_c@d+e:f=g,h"
SUFFIXES = {"accepted": ACCEPTED, "hostile": HOSTILE}

#: Templates that take no spec-derived value, with the reason (they still render and are checked).
NO_SPEC_VALUES: dict[str, str] = {
    "roles/kafka/templates/admin.properties.j2": "the client side of the plan's auth choice (an enum) and role paths",
    "roles/kafka/templates/log4j2.properties.j2": "logging levels and the role's log pattern only",
    "roles/kafka/templates/tools-log4j2.properties.j2": "logging levels and the role's log pattern only",
    "roles/common/templates/kiln-cpu-governor.service.j2": "inserts only role defaults (script path)",
    "roles/common/templates/kiln-transparent-hugepages.service.j2": "inserts only role defaults (script path)",
    "roles/firewall/templates/kiln-firewall.service.j2": "inserts only role defaults (nft binary and rules path)",
    "roles/objectstore/templates/_unit_hardening.j2": "a fragment included by the SeaweedFS units (checked there)",
    "roles/bench_tools/templates/bench-tools.json.j2": "role defaults and versions read from the host's dpkg",
    "roles/common/templates/chrony-kiln.sources.j2": "time servers from the role default common_chrony_sources",
    "roles/gpu/templates/kiln-gpu-modules.conf.j2": "a fixed module name (gpu_peermem is a boolean)",
    "roles/gpu/templates/nvidia-persistenced-kiln.conf.j2": "no variable at all",
    "roles/monitoring/templates/kiln-health.timer.j2": "inserts only the role default monitoring_health_interval",
    "roles/monitoring/templates/kiln-lustre-exporter.service.j2": "inserts only role defaults (library dir, port)",
    "roles/objectstore/templates/filer.toml.j2": "role default paths only",
    "roles/objectstore/templates/security.toml.j2": "keys the role generates (48 letters and digits), integers",
    "roles/rdma/templates/kiln-rdma-modules.conf.j2": "module names from role defaults by fabric (closed vocabulary)",
    "roles/rdma/templates/kiln-roce-qos.service.j2": "role defaults (script path, sysfs class) and integers",
}

#: The host whose variables render each role's templates (a host the role's play runs on).
ROLE_HOST = {
    "bench_tools": "gpu001", "common": "gpu001", "firewall": "gpu001", "gpu": "gpu001", "lnet": "gpu001",
    "datamover": "gpu001", "lustre_client": "gpu001", "lustre_ha": "oss01", "lustre_server": "mds01",
    "monitoring": "gpu001",
    "nccl": "gpu001", "objectstore": "s3-01", "rdma": "gpu001", "kafka": "kafka-01",
}
#: Roles whose hosts only some stacks plan (the bare-metal token stream: the lab's), and the stack that checks their
#: templates for a spec-derived value.
ROLE_STACK = {"kafka": "lab"}

Facts = Callable[[dict[str, Any]], dict[str, Any]]


def _unit_name(path: str) -> str:
    """`systemd-escape --path --suffix=mount PATH`, as tasks/detect.yml's probe (kiln.cluster.host_probe) names it."""
    out = []
    for i, ch in enumerate(path.strip("/")):
        if ch == "/":
            out.append("-")
        elif (ch.isascii() and (ch.isalnum() or ch in ":_")) or (ch == "." and i > 0):
            out.append(ch)
        else:
            out.extend(f"\\x{b:02x}" for b in ch.encode())
    return "".join(out) + ".mount"


def _rendered(v: dict[str, Any], name: str) -> str:
    """A variable's value as the role's tasks see it (a default may be a template of other variables)."""
    return str(Templar(loader=DataLoader(), variables=v).template(v[name]))


def _lustre_server(v: dict[str, Any]) -> dict[str, Any]:
    """tasks/validate.yml orders this host's targets (MGT, MDTs, OSTs); tasks/units.yml names their units and
    loops over them (`item` is the first)."""
    def ordered(targets: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return sorted(targets, key=lambda t: ({"mgt": 0, "mdt": 1, "ost": 2}[t["kind"]], t["index"]))
    own = ordered(v["lustre_server_targets"])
    standby = ordered(v.get("lustre_server_standby_targets") or [])
    return {"__lustre_server_ordered": own, "__lustre_server_standby": standby, "item": own[-1],
            "__lustre_server_unit_of": {t["name"]: _unit_name(t["mount_point"]) for t in own + standby}}


def _lustre_ha(v: dict[str, Any]) -> dict[str, Any]:
    """tasks/resources.yml: the pair (no agent missing) and its commands from plugins/filter/pacemaker.py."""
    spec = importlib.util.spec_from_file_location("kiln_filter_pacemaker", ROOT / "plugins" / "filter" / "pacemaker.py")
    assert spec is not None and spec.loader is not None
    pacemaker = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pacemaker)
    templar = Templar(loader=DataLoader(), variables=v)
    pair = {key: templar.template(v[var]) for key, var in (
        ("nodes", "lustre_ha_nodes"), ("resources", "lustre_ha_resources"), ("lnet_checks", "lustre_ha_lnet_checks"),
        ("fencing", "lustre_ha_fencing"), ("timing", "lustre_ha_timing"), ("stickiness", "lustre_ha_stickiness"),
        ("md_conf", "lustre_ha_md_conf"))}
    return {"__lustre_ha_pair": pair, "__lustre_ha_commands": pacemaker.pcs_commands(pair)}


def _lustre_server_md(v: dict[str, Any]) -> dict[str, Any]:
    """tasks/main.yml picks the md targets of the host and its partner; tasks/md.yml reads their UUIDs."""
    shared = [t for t in v["lustre_server_targets"] + (v.get("lustre_server_standby_targets") or [])
              if t.get("protection") in ("raid1", "raid5", "raid6", "raid10")
              and str(t["device"]).startswith("/dev/md/")]
    uuids = {t["device"]: f"0a1b2c3d:4e5f6071:8293a4b5:c6d7e8f{i}" for i, t in enumerate(shared)}
    return {"__lustre_server_md_shared": shared, "__lustre_server_md_uuids": uuids}


#: Test doubles of the facts each template's task has set by the time it runs (roles/<role>/tasks).
FACTS: dict[str, Facts] = {
    # tasks/state.yml: package → installed version, read from dpkg on the host; ior and mdtest built (the
    # host_probe answers for their paths).
    "roles/bench_tools/templates/bench-tools.json.j2": lambda v: {
        "bench_tools_package_versions": {"fio": "3.33-3", "iperf3": "3.12-1"},
        "bench_tools_state_probe": {"paths": {f"{_rendered(v, 'bench_tools_ior_prefix')}/bin/{tool}": {"exists": True}
                                              for tool in ("ior", "mdtest")}},
        "bench_tools_nccl_tests_reason": "", "bench_tools_warp_version_output": "warp version v1.0.0"},
    # tasks/detect.yml: systemd's major version on the host.
    # tasks/services.yml loops over the scheduled links (vars/main.yml __datamover_scheduled); a stack with
    # no scheduled link gets its first link with a calendar, so the timer is still rendered with its values.
    "roles/datamover/templates/kiln-datamover-stage@.timer.j2": lambda v: {
        "item": next((link for link in v["datamover_links"] if link["on_calendar"]),
                     {**v["datamover_links"][0], "cron": "0 2 * * *", "on_calendar": "*-*-* 02:00:00"})},
    "roles/lnet/templates/kiln-lnet.service.j2": lambda v: {"__lnet_systemd_version": 252},
    # tasks/mounts.yml loops over lustre_client_mounts; tasks/validate.yml sets the sources.
    "roles/lustre_client/templates/lustre-client.mount.j2": lambda v: {
        "item": v["lustre_client_mounts"][0],
        "__lustre_client_sources": {m["mount_point"]: ":".join(",".join(n) for n in m["mgs_nids"]) + ":/" + m["fsname"]
                                    for m in v["lustre_client_mounts"]}},
    # tasks/resources.yml: every agent installed; the pair turned into pcs commands by the role's filter.
    "roles/lustre_ha/templates/lustre-ha.pcs.sh.j2": _lustre_ha,
    # tasks/md.yml: the shared md arrays of the host and its partner, each with the UUID its superblock holds.
    "roles/lustre_server/templates/mdadm-lustre.conf.j2": _lustre_server_md,
    # tasks/units.yml loops over this host's targets.
    "roles/lustre_server/templates/lustre-target.mount.j2": _lustre_server,
    "roles/lustre_server/templates/kiln-lustre-server.target.j2": _lustre_server,
    # tasks/credentials.yml: keys from the controller's password lookup (48 letters and digits).
    "roles/objectstore/templates/security.toml.j2": lambda v: {
        "__objectstore_jwt_keys": {"signing": "A" * 48, "filer_signing": "B" * 48, "filer_read": "C" * 48}},
    "roles/objectstore/templates/_unit_hardening.j2": lambda v: {"__objectstore_unit_rw": "/srv/seaweedfs"},
    # tasks/main.yml picks the rails of the fabric; tasks/rails.yml loops over them with an index.
    "roles/rdma/templates/rail.network.j2": lambda v: {
        "__rdma_rails": v["rdma_ipoib_interfaces"], "__rdma_rails_prefix": v["rdma_networkd_prefix"],
        "__rdma_rails_table_base": v["rdma_ipoib_route_table_base"], "__rdma_rails_kind": "IPoIB",
        "item": v["rdma_ipoib_interfaces"][0], "rdma_rail_index": 0},
}


#: Inventory keys whose values are closed vocabularies (pydantic Literal fields, plan enums): the spec cannot
#: carry anything else there, so they keep their real values.
CLOSED = {"kind", "role", "backend", "protection", "kiln_fabric", "rdma_fabric", "lustre_server_backend",
          "objectstore_backend", "common_cpu_governor", "common_transparent_hugepages", "ansible_host", "ansible_user",
          # inventory host names (generated from Name-typed pool names): what hostvars is indexed by
          "objectstore_masters", "objectstore_hosts", "monitoring_hosts", "failover_host", "kiln_failover_partner",
          # the token stream's enums (argument specs: choices)
          "kafka_auth", "kafka_process_roles"}


def _spec_strings(data: Any, suffix: str, key: str = "") -> Any:
    """The inventory's values with `suffix` on every string (keys kept: they are Ansible variable names)."""
    if isinstance(data, str):
        return data if key in CLOSED or not data else data + suffix  # "" means absent
    if isinstance(data, list):
        return [_spec_strings(x, suffix, key) for x in data]
    if isinstance(data, dict):
        return {k: _spec_strings(x, suffix, str(k)) for k, x in data.items()}
    return data


def _write_inventory(out: Path, stack: str, suffix: str) -> None:
    spec = load_stack(stack)
    for rel, text in render_inventory(build_plan(spec)).items():
        path = out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if suffix and rel != "hosts.yml":
            data = yaml.safe_load(text.replace("!unsafe ", "")) or {}
            text = yaml.safe_dump(_spec_strings(data, suffix), sort_keys=False)
        path.write_text(text)


@cache
def _variables(stack: str, variant: str, host: str, tmp: str) -> dict[str, Any]:
    out = Path(tmp) / f"{stack}-{variant}"
    if not out.exists():
        _write_inventory(out, stack, SUFFIXES.get(variant, ""))
    loader = DataLoader()
    inventory = InventoryManager(loader=loader, sources=[str(out / "hosts.yml")])
    manager = VariableManager(loader=loader, inventory=inventory)
    found = inventory.get_host(host)
    assert found is not None, f"{stack} has no host {host}"
    variables = dict(manager.get_vars(host=found, include_hostvars=False))
    variables["hostvars"] = HostVars(inventory=inventory, variable_manager=manager, loader=loader)
    return variables


def _trusted(data: Any) -> Any:
    """A role's own files are templates to Ansible (their strings are evaluated when used)."""
    if isinstance(data, str):
        return trust_as_template(data)
    if isinstance(data, list):
        return [_trusted(x) for x in data]
    if isinstance(data, dict):
        return {k: _trusted(x) for k, x in data.items()}
    return data


def _role_file(role: str, name: str) -> dict[str, Any]:
    path = ROOT / "roles" / role / name / "main.yml"
    return _trusted(yaml.safe_load(path.read_text()) or {}) if path.exists() else {}


#: The lab's hosts are Debian 12: their facts (tests/fixtures/os_facts/debian12.json) and each role's Debian vars.
LAB_FACTS = json.loads((ROOT / "tests" / "fixtures" / "os_facts" / "debian12.json").read_text())["facts"]


def render(template: str, variables: dict[str, Any]) -> str:
    role = template.split("/")[1]
    os_vars = ROOT / "roles" / role / "vars" / "Debian.yml"
    merged = {**_role_file(role, "defaults"), **variables, **_role_file(role, "vars"),
              **(_trusted(yaml.safe_load(os_vars.read_text()) or {}) if os_vars.exists() else {}),
              "ansible_managed": "Ansible managed", "ansible_facts": LAB_FACTS}
    try:
        merged.update(FACTS.get(template, lambda v: {})(merged))
    except IndexError:
        pytest.skip(f"not applicable to this stack: the task that renders {template} loops over nothing")
    loader = DataLoader()
    loader.set_basedir(str(ROOT / "roles" / role / "templates"))
    templar = Templar(loader=loader, variables=merged)
    return str(templar.template(trust_as_template((ROOT / template).read_text())))


@pytest.fixture(scope="module")
def inventories(tmp_path_factory: pytest.TempPathFactory) -> str:
    init_ansible_plugins()  # lookups such as ansible.builtin.env resolve, and the collection's modules import
    return str(tmp_path_factory.mktemp("inventories"))


def _kind(template: str) -> str:
    name = template.rsplit("/", 1)[1].removesuffix(".j2")
    if name.endswith(".sh"):
        return "shell"
    if name.endswith(".json"):
        return "json"
    if name.endswith((".yml", ".yaml")):
        return "yaml"
    if name.endswith(".toml"):
        return "toml"
    return "lines"


def _outside_single_quotes(line: str, start: int) -> bool:
    """Whether position `start` of a shell line is outside single quotes (a shell's own quoting rules)."""
    single = double = False
    i = 0
    while i < start:
        ch = line[i]
        if ch == "\\" and not single:
            i += 2
            continue
        if ch == "'" and not double:
            single = not single
        elif ch == '"' and not single:
            double = not double
        i += 1
    return not single


def _directives(text: str) -> list[str]:
    """The non-comment lines of a line-based file, reduced to what names the directive."""
    out = []
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith(("#", ";", "//")):
            continue
        out.append(re.split(r"[=\s]", stripped, maxsplit=1)[0])
    return out


def _strings(data: Any) -> list[str]:
    if isinstance(data, str):
        return [data]
    if isinstance(data, list):
        return [s for x in data for s in _strings(x)]
    if isinstance(data, dict):
        return [s for k, x in data.items() for s in [*_strings(k), *_strings(x)]]
    return []


def test_every_template_has_a_context() -> None:
    """A new template must get its facts here (or be allow-listed) before it can pass."""
    assert ROLE_TEMPLATES and PACKAGE_TEMPLATES
    known = set(FACTS) | set(NO_SPEC_VALUES)
    for template in ROLE_TEMPLATES:
        role = template.split("/")[1]
        assert role in ROLE_HOST, f"{template}: add its role's host to ROLE_HOST"
    stale = known - set(ROLE_TEMPLATES)
    assert not stale, f"entries for templates that no longer exist: {sorted(stale)}"
    assert set(PACKAGE_TEMPLATES) == {
        "kiln/templates/plan-report.txt.j2", "kiln/templates/plan-report.md.j2", "kiln/templates/plan-report.html.j2",
        "kiln/templates/verify-report.html.j2", "kiln/templates/starter-stack.yaml.j2",
    }, "a new package template: add a check for it at the end of this module"


STACKS = ("lab", "prod-h100")


@pytest.mark.parametrize("variant", SUFFIXES)
@pytest.mark.parametrize("stack", STACKS)
@pytest.mark.parametrize("template", ROLE_TEMPLATES)
def test_template_keeps_hostile_values_in_their_place(template: str, stack: str, variant: str,
                                                      inventories: str) -> None:
    role = template.split("/")[1]
    host = ROLE_HOST[role]
    if role in ROLE_STACK and stack != ROLE_STACK[role]:
        pytest.skip(f"{stack} plans no {host}")
    suffix = SUFFIXES[variant]
    plain = render(template, _variables(stack, "plain", host, inventories))
    hostile = render(template, _variables(stack, variant, host, inventories))
    kind = _kind(template)
    if kind == "shell":
        _check_shell(template, plain, hostile)
    elif kind == "json":
        json.loads(plain)
        _check_round_trip(template, json.loads(hostile), suffix)
    elif kind == "yaml":
        yaml.safe_load(plain)
        _check_round_trip(template, yaml.safe_load(hostile), suffix)
    elif kind == "toml":
        tomllib.loads(plain)
        assert _directives(hostile) == _directives(plain)
        tomllib.loads(hostile)
    elif re.search(r"(?m)^\[(Unit|Service|Mount|Install|Match|Link|Network|Route|RoutingPolicyRule)\]$", plain):
        # systemd: the directive names are the template's own; a value can add none
        assert _directives(hostile) == _directives(plain), f"{template}: a value added or removed a directive"
    else:
        # sysctl, nccl.conf, modprobe, corosync, crm, nftables, ...: names may be values here (a sysctl key)
        assert len(_directives(hostile)) == len(_directives(plain)), f"{template}: a value added or removed a line"
    if template not in NO_SPEC_VALUES and stack == ROLE_STACK.get(role, "prod-h100"):
        assert suffix.strip() in hostile or (variant == "hostile" and MARKER in hostile), (
            f"{template} inserts no spec-derived value: allow-list it in NO_SPEC_VALUES with the reason")


def _check_shell(template: str, plain: str, hostile: str) -> None:
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("not applicable on this host: bash is not installed")
    for text in (plain, hostile):
        r = subprocess.run([bash, "-n"], input=text, capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, f"{template}: {r.stderr}"
    for n, line in enumerate(hostile.splitlines(), 1):
        if line.lstrip().startswith("#"):
            continue
        for m in re.finditer(re.escape(MARKER), line):
            assert not _outside_single_quotes(line, m.start()), f"{template} line {n} runs a value: {line}"


def _check_round_trip(template: str, data: Any, suffix: str) -> None:
    hostile = [s for s in _strings(data) if s.endswith(suffix)]
    for s in _strings(data):
        if suffix.strip() in s:
            assert s.endswith(suffix), f"{template}: {s!r} was changed on the way"
    assert hostile or template in NO_SPEC_VALUES, f"{template}: no hostile value came back"


#: The worst free text the spec accepts (types.Text: anything printable on one line without template delimiters).
WORST_TEXT = "lab 'q' \"dq\" $(touch PWNED) `id` ; | & < > * ? [x] # \\ {x} % ~"


def test_plan_report_keeps_the_description_on_its_line() -> None:
    """kiln/templates/plan-report.txt.j2: the spec's free text appears verbatim, on its line, adding none."""
    from kiln.render.report import render_plan_report
    from kiln.spec import validate
    from tests.conftest import stack_data

    data = stack_data("lab")
    plain = render_plan_report(build_plan(validate(data)))
    data["description"] = WORST_TEXT
    hostile = render_plan_report(build_plan(validate(data)))
    assert hostile.splitlines()[0] == f"kiln plan — lab ({WORST_TEXT})"
    assert len(hostile.splitlines()) == len(plain.splitlines())


def test_plan_report_html_escapes_spec_text() -> None:
    """kiln/templates/plan-report.html.j2 autoescapes: the spec's free text is text, never markup; the only
    markup it inserts is the charts' SVG, built from numbers and escaped layer names (kiln/render/chart.py).
    kiln/templates/plan-report.md.j2 keeps the description verbatim on its own line."""
    from markupsafe import escape

    from kiln.render.report import environment, render_plan
    from kiln.spec import validate
    from tests.conftest import stack_data

    data = stack_data("lab")
    data["description"] = WORST_TEXT
    plan = build_plan(validate(data))
    page = render_plan(plan, "html")
    assert WORST_TEXT not in page and str(escape(WORST_TEXT)) in page
    assert page.count("<svg") == 2 and "<script" not in page
    assert environment().autoescape("plan-report.html.j2") is True
    assert f"\n{WORST_TEXT}\n" in render_plan(plan, "md")


def test_verify_report_template_escapes_what_it_inserts() -> None:
    """kiln/templates/verify-report.html.j2 renders with autoescape, so check output and spec text stay text
    (the rendered report with hostile check output: tests/unit/verify/test_verify_runner_report.py
    test_html_report_escapes_check_output)."""
    from kiln.templating import environment

    env = environment()
    assert callable(env.autoescape)
    assert env.autoescape("verify-report.html.j2") is True and env.autoescape("plan-report.txt.j2") is False


@pytest.mark.parametrize("template", [t for t in ROLE_TEMPLATES if _kind(t) == "shell"])
def test_shell_templates_quote_or_cast_every_insertion(template: str) -> None:
    """Outside comments, every `{{ ... }}` in a shell template ends in `| quote` or `| int` (role defaults too,
    which the hostile inventory above does not reach), or is a join of quoted words."""
    for n, line in enumerate((ROOT / template).read_text().splitlines(), 1):
        if line.lstrip().startswith("#"):
            continue
        for expr in re.findall(r"\{\{(.*?)\}\}", line):
            body = expr.strip()
            quoted = re.search(r"\|\s*(quote|int)$", body) or re.search(r"map\('quote'\)\s*\|\s*join\(' '\)$", body)
            # a variable *name* cannot be quoted: it must be checked against a safe pattern or refused
            guarded = re.fullmatch(r"(\w+) if \1 is match\('\^[\w\[\]+-]+\$'\) else undef\(hint=.*\)", body)
            assert quoted or guarded, f"{template} line {n}: {{{{{expr}}}}} is inserted unquoted"


def test_nccl_env_script_refuses_a_name_that_is_not_a_variable(inventories: str) -> None:
    variables = dict(_variables("lab", "plain", ROLE_HOST["nccl"], inventories))
    variables["nccl_env"] = {**variables["nccl_env"], "NCCL_X=1;touch PWNED;x": "1"}
    with pytest.raises(Exception, match="nccl_env names must match"):
        render("roles/nccl/templates/kiln-nccl.sh.j2", variables)


def test_starter_stack_keeps_every_answer_a_value() -> None:
    """kiln/templates/starter-stack.yaml.j2 (`kiln init`): every string answer, however hostile, loads back as the
    same string in its field; the document's structure does not change (kiln init validates the rest)."""
    from kiln.render.starter import QUESTIONS, render_starter

    def fields(doc: object, path: str = "") -> dict[str, object]:
        if isinstance(doc, dict):
            return {k: v for key, val in doc.items() for k, v in fields(val, f"{path}.{key}").items()}
        if isinstance(doc, list):
            return {k: v for i, val in enumerate(doc) for k, v in fields(val, f"{path}[{i}]").items()}
        return {path: doc}

    plain = {q.key: q.default for q in QUESTIONS}
    hostile = {q.key: (WORST_TEXT + "\n  evil: {x: 1}" if q.kind is str else q.default) for q in QUESTIONS}
    before = fields(yaml.safe_load(render_starter("lab", {**plain, "fabric": "roce"})))
    after = fields(yaml.safe_load(render_starter("lab", {**hostile, "fabric": "roce"})))
    assert before.keys() == after.keys()
    assert after[".config.kiln:cluster.compute.pools[0].compute_rails.nic"] == hostile["nic"]
    assert after[".config.kiln:cluster.networks.management"] == hostile["management_network"]
