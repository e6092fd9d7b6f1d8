"""The knowledge files load into typed models; a malformed file names the file, the path and the problem."""

from __future__ import annotations

from importlib import resources

import pytest
import yaml

from kiln import knowledge


def _text(name: str) -> str:
    return resources.files("kiln.knowledge").joinpath(name).read_text(encoding="utf-8")


def test_every_knowledge_file_loads_into_its_model() -> None:
    kb = knowledge.load()
    assert kb is knowledge.load()  # cached once per process
    assert kb.nics["cx7-ndr400"].link_GBps == 50.0
    assert kb.pcie.rates[5] == 63.0
    assert kb.tuning.lustre["client.osc.max_dirty_mb"].integer("kernel_default_MiB") == 2000
    assert kb.ports.seaweedfs.s3.value == 8333


def test_every_sourced_entry_names_a_source() -> None:
    kb = knowledge.load()
    entries = [*kb.gpus.values(), *kb.nics.values(), *kb.nvme.values(), *kb.factors.values()]
    entries += [*kb.read_profiles.values(), *kb.tuning.lustre.values(), *kb.tuning.lnet.values()]
    entries += [*kb.tuning.nccl.values(), *kb.tuning.host.sysctls.values(), *kb.tuning.host.others().values()]
    entries += [v for _, v in kb.tuning.layouts] + [v for _, v in kb.tuning.protocol] + [v for _, v in kb.seaweedfs]
    entries += kb.ports.entries()
    assert len(entries) > 60
    for e in entries:
        assert e.source.strip(), e


@pytest.mark.parametrize(
    ("name", "section", "key", "field"),
    [
        ("hardware.yaml", "gpus", "h100-sxm", "source"),
        ("efficiency.yaml", "factors", "rdma_payload", "source"),
        ("efficiency.yaml", "factors", "tcp_payload", "reason"),
        ("workload.yaml", "read_profiles", "llm-text", "source"),
        ("tuning.yaml", "lustre", "client.osc.max_dirty_mb", "source"),
        ("objectstore.yaml", "seaweedfs", "extra_collections", "source"),
        ("ports.yaml", "seaweedfs", "s3", "source"),
        ("ports.yaml", "acceptance", "iperf3", "reason"),
    ],
)
def test_an_entry_without_its_source_or_reason_is_refused(name: str, section: str, key: str, field: str) -> None:
    data = yaml.safe_load(_text(name))
    del data[section][key][field]
    with pytest.raises(knowledge.KnowledgeError) as e:
        knowledge.parse(name, yaml.safe_dump(data), knowledge.FILES[name])
    assert f"kiln/knowledge/{name}" in str(e.value)
    assert (f"{section}.{key}.{field}", "Field required") in e.value.problems


def test_a_wrong_type_is_refused_with_its_path() -> None:
    data = yaml.safe_load(_text("hardware.yaml"))
    data["nics"]["cx7-ndr400"]["link_Gbps"] = "fast"
    with pytest.raises(knowledge.KnowledgeError) as e:
        knowledge.parse("hardware.yaml", yaml.safe_dump(data), knowledge.HardwareFile)
    assert any(path.startswith("nics.cx7-ndr400.link_Gbps") for path, _ in e.value.problems)


def test_a_file_that_is_not_yaml_is_refused() -> None:
    with pytest.raises(knowledge.KnowledgeError) as e:
        knowledge.parse("workload.yaml", "a: [unclosed", knowledge.WorkloadFile)
    assert "kiln/knowledge/workload.yaml" in str(e.value)
    assert "not valid YAML" in str(e.value)
