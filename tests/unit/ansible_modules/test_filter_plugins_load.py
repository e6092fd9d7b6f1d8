"""Every kiln.cluster filter resolves by its FQCN in Ansible's own templating (the plugin loader, the
collection from this checkout), as the roles call them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from kiln_ansible_support import REPO, collection_env
from kiln_filters import filter_plugin

ANSIBLE = Path(sys.executable).parent / "ansible"

#: One call of each filter, and what it must give.
CALLS = {
    "absent": ("{{ {'lctl': none, 'lfs': '/usr/bin/lfs'} | kiln.cluster.absent }}", ["lctl"]),
    "answer_is": ("{{ {'type': 'directory', 'mode': '0755'} | kiln.cluster.answer_is(type='directory') }}", True),
    "answers_where": ("{{ {'a.service': {'unit_file': false}} | kiln.cluster.answers_where(unit_file=false) }}",
                      ["a.service"]),
    "version_output": ("{{ {'weed': {'stdout': 'version 30GB 3.39'}} | kiln.cluster.version_output('weed') }}",
                       "version 30GB 3.39"),
    "weed_release": ("{{ 'version 30GB 3.39 51d4a4b2 linux amd64' | kiln.cluster.weed_release }}", "3.39"),
    "weed_build": ("{{ 'version 8000GB 4.31 pypi linux amd64' | kiln.cluster.weed_build }}", "8000GB"),
    "weed_bucket_names": ("{{ '>   ckpt\tsize:0\tfile:0' | kiln.cluster.weed_bucket_names }}", ["ckpt"]),
    "weed_shell_errors": ("{{ 'error: empty bucket name' | kiln.cluster.weed_shell_errors }}",
                          ["error: empty bucket name"]),
    "gpu_looked_at": ("{{ {'paths': {'/proc/driver/nvidia/gpus': {'exists': false}}, 'pci': [], 'tools': {}}"
                      " | kiln.cluster.gpu_looked_at('0x10de', ['0x0302']) }}",
                      "/proc/driver/nvidia/gpus: absent; PCI functions with vendor 0x10de and class 0x0302: none; "
                      "nvidia-smi: not installed"),
    "rdma_looked_at": ("{{ {'paths': {'/sys/class/infiniband': {'exists': false}}, 'pci': []}"
                       " | kiln.cluster.rdma_looked_at('/sys/class/infiniband', ['0x15b3']) }}",
                       "/sys/class/infiniband: absent; PCI functions with vendor 0x15b3 in /sys/bus/pci/devices: none"),
    "lustre_start_order": ("{{ [{'kind': 'ost', 'index': 0}, {'kind': 'mgt', 'index': 0}]"
                           " | kiln.cluster.lustre_start_order | map(attribute='kind') }}", ["mgt", "ost"]),
    "lustre_server_lacks": ("{{ ['lctl'] | kiln.cluster.lustre_server_lacks(true, 'ldiskfs') }}",
                            "the Lustre server tools lctl"),
    "lustre_layout_reach": ("{{ ['lfs present', 'parent 0'] | kiln.cluster.lustre_layout_reach([{'path': '/l/a'}])"
                            " | dict2items | map(attribute='value') | list }}", [True, [], ["/l/a"]]),
    "ocf_agent_path": ("{{ 'ocf:lustre:Lustre' | kiln.cluster.ocf_agent_path }}",
                       "/usr/lib/ocf/resource.d/lustre/Lustre"),
    "ocf_agents_missing": ("{{ ['ocf:lustre:Lustre'] | kiln.cluster.ocf_agents_missing("
                           "{'/usr/lib/ocf/resource.d/lustre/Lustre': {'executable': false}}) }}",
                           ["ocf:lustre:Lustre"]),
    "lnet_attribute": ("{{ 'ibp65s0' | kiln.cluster.lnet_attribute }}", "lnet_ibp65s0"),
    "usable_resources": ("{{ [{'name': 'OST0', 'agent': 'ocf:lustre:Lustre', 'md_device': '/dev/md/o0'}]"
                         " | kiln.cluster.usable_resources(['ocf:heartbeat:mdraid']) }}", []),
    "pcs_commands": ("{{ {'nodes': [], 'resources': [], 'lnet_checks': [], 'fencing': {'agent': 'none-lab'},"
                     " 'timing': {}, 'stickiness': 200, 'md_conf': '/etc/kiln/mdadm-lustre.conf'}"
                     " | kiln.cluster.pcs_commands | first }}",
                     ["property", "set", "stonith-enabled=false", "no-quorum-policy=stop"]),
    "os_support_problem": ("{{ {'os_family': 'RedHat', 'distribution': 'Rocky', 'distribution_major_version': '9',"
                           " 'distribution_version': '9.4'} | kiln.cluster.os_support_problem('lustre_server') }}", ""),
    "os_platform": ("{{ {'os_family': 'Debian', 'distribution': 'Ubuntu', 'distribution_major_version': '24',"
                    " 'distribution_version': '24.04'} | kiln.cluster.os_platform }}", "ubuntu2404"),
}


def test_every_filter_is_called_here() -> None:
    names = {name for path in (REPO / "plugins" / "filter").glob("*.py")
             for name in filter_plugin(path.stem).FilterModule().filters()}
    assert names == set(CALLS)


def test_each_filter_through_ansible(tmp_path: Path) -> None:
    play = tmp_path / "play.yml"
    tasks = [{"name": name, "ansible.builtin.set_fact": {"out": expr}} for name, (expr, _) in CALLS.items()]
    play.write_text(json.dumps([{"hosts": "localhost", "gather_facts": False, "tasks": tasks}]), encoding="utf-8")
    env = {**collection_env(tmp_path), "ANSIBLE_STDOUT_CALLBACK": "json", "ANSIBLE_LOAD_CALLBACK_PLUGINS": "1",
           "ANSIBLE_LOCAL_TEMP": str(tmp_path / "tmp")}
    proc = subprocess.run([str(ANSIBLE.with_name("ansible-playbook")), "-i", "localhost,", "-c", "local",
                           str(play)], capture_output=True, text=True, env=env, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    results = {t["task"]["name"]: t["hosts"]["localhost"]["ansible_facts"]["out"]
               for t in json.loads(proc.stdout)["plays"][0]["tasks"]}
    assert results == {name: expected for name, (_, expected) in CALLS.items()}
