"""kiln.lustre.lustre_layout (and lustre_common): lfs getstripe parsing, setstripe builder, validation, drift."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kiln_ansible_support import load_fixture

from kiln.lustre import lustre_common as common
from kiln.lustre import lustre_layout as kl

M = 1 << 20
C = kl.LayoutComponent

PFL_DOM_POOL = [
    C(extent_end=M, stripe_size=M, dom=True),
    C(extent_end=64 * M, stripe_count=1, stripe_size=M, pool="flash"),
    C(extent_end=None, stripe_count=-1, stripe_size=4 * M, pool="flash"),
]


def test_yaml_pfl_dom_pool() -> None:
    assert kl.parse_getstripe(load_fixture("getstripe_yaml_pfl_dom_pool.txt")) == PFL_DOM_POOL


def test_composite_text_form() -> None:
    assert kl.parse_getstripe(load_fixture("getstripe_composite_text.txt")) == [
        C(extent_end=65536, stripe_size=65536, dom=True),
        C(extent_end=None, stripe_count=-1, stripe_size=M),
    ]


def test_verbose_components_form_with_overstriping() -> None:
    assert kl.parse_getstripe(load_fixture("getstripe_verbose_components.txt")) == [
        C(extent_end=4 * M, stripe_count=1, stripe_size=M),
        C(extent_end=None, overstripe_count=4, stripe_size=4 * M, pool="flash"),
    ]


@pytest.mark.parametrize(
    ("fixture", "expected"),
    [
        ("getstripe_plain.txt", C(extent_end=None, stripe_count=1, stripe_size=M, pool="ddn_hdd")),
        ("getstripe_plain_overstriped.txt", C(extent_end=None, overstripe_count=8, stripe_size=M)),
        ("getstripe_yaml_plain.txt", C(extent_end=None, stripe_count=-1, stripe_size=4 * M)),
    ],
)
def test_plain_forms(fixture: str, expected: kl.LayoutComponent) -> None:
    assert kl.parse_getstripe(load_fixture(fixture)) == [expected]


@pytest.mark.parametrize("text", ["", "\n", load_fixture("getstripe_no_layout.txt")])
def test_no_layout(text: str) -> None:
    assert kl.parse_getstripe(text) is None


def test_setstripe_args_for_pfl_dom_pool() -> None:
    expected = ["-E", "1M", "-L", "mdt", "-E", "64M", "-c", "1", "-S", "1M", "-p", "flash"]
    expected += ["-E", "-1", "-c", "-1", "-S", "4M", "-p", "flash"]
    assert kl.build_setstripe_args(PFL_DOM_POOL) == expected


def test_setstripe_args_for_plain_overstriped_and_unset_fields() -> None:
    assert kl.build_setstripe_args([C(extent_end=None, stripe_count=4, stripe_size=M)]) == ["-c", "4", "-S", "1M"]
    assert kl.build_setstripe_args([C(extent_end=None, overstripe_count=32, stripe_size=4 * M)]) == [
        "-C",
        "32",
        "-S",
        "4M",
    ]
    assert kl.build_setstripe_args([C(extent_end=64 * M, stripe_count=1), C(extent_end=None)]) == [
        "-E",
        "64M",
        "-c",
        "1",
        "-E",
        "-1",
    ]


def test_layout_from_spec_normalises_sizes_and_eof() -> None:
    raw = [
        {"extent_end": "1M", "dom": True},
        {"extent_end": "64M", "stripe_count": 1, "stripe_size": "1M", "pool": "flash"},
        {"extent_end": "EOF", "stripe_count": -1, "stripe_size": 4194304, "pool": "flash"},
    ]
    wanted = kl.layout_from_spec(raw)
    assert wanted[0] == C(extent_end=M, dom=True)
    assert wanted[1:] == PFL_DOM_POOL[1:]
    assert kl.layout_from_spec([{"extent_end": -1}])[0].extent_end is None
    assert kl.layout_from_spec([{"extent_end": "eof", "pool": ""}])[0].pool is None


@pytest.mark.parametrize(
    ("layout", "fragment"),
    [
        ([], "at least one component"),
        ([C(extent_end=64 * M)], "must end at EOF"),
        ([C(extent_end=None), C(extent_end=None)], "only the last component may end at EOF"),
        ([C(extent_end=64 * M), C(extent_end=32 * M), C(extent_end=None)], "must grow"),
        ([C(extent_end=100_000), C(extent_end=None)], "multiple of 64K"),
        ([C(extent_end=None, stripe_size=100_000)], "positive multiple of 64K"),
        ([C(extent_end=M, stripe_size=4 * M), C(extent_end=None)], "multiple of its stripe_size"),
        ([C(extent_end=M), C(extent_end=2 * M, dom=True), C(extent_end=None)], "only the first component"),
        ([C(extent_end=M, dom=True, pool="flash"), C(extent_end=None)], "takes no stripe_count"),
        ([C(extent_end=M, dom=True, stripe_count=2), C(extent_end=None)], "takes no stripe_count"),
        ([C(extent_end=M, dom=True, stripe_size=64 * 1024), C(extent_end=None)], "size is its extent_end"),
        ([C(extent_end=None, stripe_count=2, overstripe_count=4)], "not both"),
        ([C(extent_end=None, stripe_count=-2)], "-1 (all OSTs) or more"),
        ([C(extent_end=None, overstripe_count=0)], "-1 or at least 1"),
    ],
)
def test_invalid_layouts_are_explained(layout: list[kl.LayoutComponent], fragment: str) -> None:
    errors = kl.validate_layout(layout)
    assert any(fragment in error for error in errors), errors


def test_planner_inventory_components_are_accepted() -> None:
    """Shapes kiln/render/inventory.py emits: DoM with stripe_count 0 and its size, overstripe counted twice."""
    dom = kl.layout_from_spec(
        [
            {"extent_end": "1M", "stripe_count": 0, "stripe_size": "1M", "overstripe_count": None, "dom": True},
            {"extent_end": "EOF", "stripe_count": 4, "stripe_size": "4M", "overstripe_count": None, "pool": None},
        ]
    )
    assert kl.validate_layout(dom) == []
    over = kl.layout_from_spec(
        [{"extent_end": "EOF", "stripe_count": 64, "stripe_size": "16M", "overstripe_count": 64}]
    )
    assert over == [C(extent_end=None, overstripe_count=64, stripe_size=16 * M)]
    assert kl.validate_layout(over) == []
    assert kl.validate_layout(kl.layout_from_spec([{"stripe_count": 8, "overstripe_count": 64}])) != []


def test_stripe_count_zero_means_filesystem_default_and_is_not_compared() -> None:
    current = [C(extent_end=None, stripe_count=1, stripe_size=M)]
    assert kl.layout_drift(current, [C(extent_end=None, stripe_count=0)]) == []


def test_valid_layouts_have_no_errors() -> None:
    assert kl.validate_layout(PFL_DOM_POOL) == []
    assert kl.validate_layout([C(extent_end=None, overstripe_count=-1)]) == []


def test_no_drift_against_itself_and_unset_fields_are_not_compared() -> None:
    assert kl.layout_drift(PFL_DOM_POOL, PFL_DOM_POOL) == []
    loose = [C(extent_end=M, dom=True), C(extent_end=64 * M, pool="flash"), C(extent_end=None, pool="flash")]
    assert kl.layout_drift(PFL_DOM_POOL, loose) == []


def test_drift_lists_each_differing_field() -> None:
    current = kl.parse_getstripe(load_fixture("getstripe_composite_text.txt"))
    drift = kl.layout_drift(current, PFL_DOM_POOL)
    assert {"component": None, "field": "components", "current": 2, "wanted": 3} in drift
    assert {"component": 0, "field": "extent_end", "current": "64K", "wanted": "1M"} in drift
    assert {"component": 1, "field": "extent_end", "current": "EOF", "wanted": "64M"} in drift
    assert {"component": 1, "field": "stripe_count", "current": -1, "wanted": 1} in drift
    assert {"component": 1, "field": "pool", "current": None, "wanted": "flash"} in drift


def test_drift_on_overstriping_and_missing_layout() -> None:
    plain = [C(extent_end=None, stripe_count=8, stripe_size=M)]
    over = [C(extent_end=None, overstripe_count=8, stripe_size=M)]
    assert kl.layout_drift(plain, over) == [{"component": 0, "field": "overstripe_count", "current": None, "wanted": 8}]
    missing = kl.layout_drift(None, plain)
    assert missing[0]["field"] == "layout"
    assert missing[0]["current"] is None


def test_render_layout_is_readable() -> None:
    assert kl.render_layout(PFL_DOM_POOL) == (
        "[0, 1M) mdt (Data-on-MDT)\n"
        "[1M, 64M) raid0 count=1 size=1M pool=flash\n"
        "[64M, EOF) raid0 count=-1 size=4M pool=flash\n"
    )
    assert kl.render_layout(None) == "(no default layout)\n"


@pytest.mark.parametrize(
    ("text", "nbytes"),
    [("1M", M), ("64k", 65536), ("1.5K", 1536), ("4MiB", 4 * M), ("1G", 1 << 30), ("4096", 4096), (7, 7)],
)
def test_parse_size(text: object, nbytes: int) -> None:
    assert common.parse_size(text) == nbytes


@pytest.mark.parametrize("bad", ["1.3K", "M", "-", "1X", True])
def test_parse_size_rejects(bad: object) -> None:
    with pytest.raises(ValueError):
        common.parse_size(bad)


@given(st.integers(min_value=1, max_value=1 << 50))
def test_format_size_round_trips(nbytes: int) -> None:
    assert common.parse_size(common.format_size(nbytes)) == nbytes


components = st.builds(
    lambda count, size_exp, pool, over: C(
        extent_end=None,
        stripe_count=None if over else count,
        overstripe_count=count if over and count != 0 else None,
        stripe_size=(1 << size_exp) * 65536,
        pool=pool,
    ),
    st.integers(min_value=-1, max_value=64),
    st.integers(min_value=0, max_value=6),
    st.one_of(st.none(), st.sampled_from(["flash", "disk"])),
    st.booleans(),
)


@given(st.lists(components, min_size=1, max_size=4), st.booleans())
def test_builder_output_parses_back_through_the_double_format(comps: list[kl.LayoutComponent], dom: bool) -> None:
    """Whatever the builder emits, a layout read back in the documented YAML shape compares equal."""
    ends = [(position + 1) * 64 * M for position in range(len(comps) - 1)] + [None]
    layout = [C(**{**comp.__dict__, "extent_end": end}) for comp, end in zip(comps, ends, strict=True)]
    if dom and len(layout) > 1:
        layout[0] = C(extent_end=layout[0].extent_end, stripe_size=layout[0].extent_end, dom=True)
    yaml_text = _render_yaml(layout)
    assert kl.layout_drift(kl.parse_getstripe(yaml_text), layout) == []


def _render_yaml(layout: list[kl.LayoutComponent]) -> str:
    if len(layout) == 1 and not layout[0].dom:
        return "".join(f"{key}:  {value}\n" for key, value in _fields(layout[0]))
    out = [f"  lcm_layout_gen:    0\n  lcm_mirror_count:  1\n  lcm_entry_count:   {len(layout)}\n"]
    start = 0
    for number, comp in enumerate(layout):
        end = "EOF" if comp.extent_end is None else comp.extent_end
        out.append(f"  component{number}:\n    lcme_extent.e_start: {start}\n    lcme_extent.e_end:   {end}\n")
        out.append("    sub_layout:\n" + "".join(f"      {k}:  {v}\n" for k, v in _fields(comp)) + "\n")
        start = 0 if end == "EOF" else end
    return "".join(out)


def _fields(comp: kl.LayoutComponent) -> list[tuple[str, object]]:
    if comp.dom:
        return [("stripe_count", 0), ("stripe_size", comp.extent_end), ("pattern", "mdt"), ("stripe_offset", -1)]
    over = comp.overstripe_count is not None
    count = comp.overstripe_count if over else (1 if comp.stripe_count in (None, 0) else comp.stripe_count)
    fields: list[tuple[str, object]] = [
        ("stripe_count", count),
        ("stripe_size", comp.stripe_size or M),
        ("pattern", "raid0,overstriped" if over else "raid0"),
        ("stripe_offset", -1),
    ]
    if comp.pool:
        fields.append(("pool", comp.pool))
    return fields


# Default directory layouts (DNE): lfs getdirstripe -D / lfs setdirstripe -D


def test_getdirstripe_text_and_yaml_forms() -> None:
    # real: the manual's `lfs setdirstripe testdir1 -D -c 2` (max_inherit defaults to 3 for a count above 1)
    assert kl.parse_getdirstripe(load_fixture("getdirstripe_default_text.txt")) == kl.DirDefault(2, -1, 3)
    assert kl.parse_getdirstripe(load_fixture("getdirstripe_default_yaml.txt")) == kl.DirDefault(1, 2, -1)
    assert kl.parse_getdirstripe("") is None
    assert kl.parse_getdirstripe(load_fixture("getstripe_yaml_plain.txt")) is None


def test_getdirstripe_real_2_15_5_fixed_mdt_index_one_line_per_directory() -> None:
    """Real 2.15.5 output for two directories; the parser reads one directory, so each line on its own."""
    lines = load_fixture("getdirstripe_default_mdt_index.txt").splitlines()
    # no -c given: lfs stores count 0 but, its count option unset, picks the striped max_inherit default 3
    # (lfs_setdirstripe() in lustre/utils/lfs.c, tag v2_15_0)
    assert [kl.parse_getdirstripe(line) for line in lines] == [kl.DirDefault(0, 0, 3), kl.DirDefault(0, 1, 3)]


def test_setdirstripe_args_and_round_trip() -> None:
    want = kl.dir_default_from_spec({"mdt_count": 2, "max_inherit": 3})
    assert kl.build_setdirstripe_args(want) == ["-D", "-c", "2", "-i", "-1", "-X", "3"]
    assert kl.build_setdirstripe_args(kl.DirDefault(1)) == ["-D", "-c", "1", "-i", "-1"]
    current = kl.parse_getdirstripe(load_fixture("getdirstripe_default_text.txt"))
    assert kl.dir_default_drift(current, want) == []
    assert kl.dir_default_drift(current, kl.DirDefault(4, -1, 3)) != []


def test_dir_default_validation() -> None:
    assert kl.validate_dir_default(kl.DirDefault(4, -1, 3), mdts=4) == []
    assert kl.validate_dir_default(kl.DirDefault(-1, -1, -1)) == []
    problems = kl.validate_dir_default(kl.DirDefault(5, -2, 251), mdts=4)
    assert problems == [
        "mdt_count 5: the filesystem has 4 MDT(s)",
        "mdt_index -2: must be -1 (the MDS picks) or an MDT index",
        "max_inherit 251: must be -1 (all levels), 0 or 1..250",
    ]
    assert kl.validate_dir_default(kl.DirDefault(0)) == ["mdt_count 0: must be -1 (all MDTs) or at least 1"]
    with pytest.raises(ValueError, match="mdt_count is required"):
        kl.dir_default_from_spec({"max_inherit": 3})


def test_dir_default_drift_ignores_an_unset_max_inherit() -> None:
    assert kl.dir_default_drift(kl.DirDefault(1, -1, -1), kl.DirDefault(1)) == []
    assert kl.dir_default_drift(None, kl.DirDefault(2))[0]["field"] == "dir_default"
    assert kl.dir_default_drift(kl.DirDefault(1, 0, 3), kl.DirDefault(1, -1, 3)) == [
        {"component": "dir_default", "field": "mdt_index", "current": 0, "wanted": -1}
    ]
