"""DRAM byte formulas: every expected value below is computed by hand from made-up counts.

Sources of the formulas: rocprofiler-sdk ``counter_defs.yaml`` FETCH_SIZE / WRITE_SIZE,
rocprofiler-compute ``roofline_calc.py``, rocm-systems PR #1039 (MI300 RDREQ counts 128-byte
requests too) and PR #2501 (gfx950 sized read counters).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from rocroof.analysis.dram import OUTPUT_COLUMNS, base_arch, counters_for, dram_bytes, family

from .conftest import VCOPY_BYTES, fixture_path


def _one(arch: str, **counters: float) -> dict[str, object]:
    """DRAM bytes of a single dispatch with the given counters."""
    wide = pd.DataFrame([counters], index=[7], dtype="float64")
    out = dram_bytes(wide, pd.Series([arch], index=[7]))
    assert list(out.index) == [7]
    return out.loc[7].to_dict()


def _nan(value: object) -> bool:
    return isinstance(value, float) and math.isnan(value)


def _exact(row: dict[str, object], side: str, expected: float) -> None:
    assert row[f"dram_{side}_bytes"] == expected
    assert row[f"dram_{side}_bytes_min"] == expected
    assert row[f"dram_{side}_bytes_max"] == expected


# ---- one family at a time ----------------------------------------------------------------


def test_gfx90a_tcc_ea() -> None:
    row = _one("gfx90a", TCC_EA_RDREQ_sum=100, TCC_EA_RDREQ_32B_sum=30, TCC_EA_WRREQ_sum=50, TCC_EA_WRREQ_64B_sum=20)
    _exact(row, "read", 32 * 30 + 64 * 70)  # 5440
    _exact(row, "write", 32 * 30 + 64 * 20)  # 2240
    assert row["dram_bytes_note"] is None
    assert "gfx90a" in str(row["dram_formula"])


def test_gfx942_bubble_formula() -> None:
    row = _one(
        "gfx942",
        TCC_EA0_RDREQ_sum=1000,
        TCC_BUBBLE_sum=300,
        TCC_EA0_RDREQ_32B_sum=100,
        TCC_EA0_WRREQ_sum=200,
        TCC_EA0_WRREQ_64B_sum=150,
    )
    # 300 requests of 128 B, 100 of 32 B, the other 600 of 64 B
    _exact(row, "read", 300 * 128 + 100 * 32 + 600 * 64)  # 80000
    _exact(row, "write", 50 * 32 + 150 * 64)  # 11200
    assert row["dram_bytes_note"] is None


def test_gfx950_sized_counters() -> None:
    row = _one(
        "gfx950",
        TCC_EA0_RDREQ_128B_sum=10,
        TCC_EA0_RDREQ_64B_sum=20,
        TCC_EA0_RDREQ_32B_sum=30,
        TCC_EA0_RDREQ_sum=60,
        TCC_BUBBLE_sum=0,  # reads 0 on gfx950 and must not matter
        TCC_EA0_WRREQ_sum=8,
        TCC_EA0_WRREQ_64B_sum=8,
    )
    _exact(row, "read", 10 * 128 + 20 * 64 + 30 * 32)  # 3520
    _exact(row, "write", 8 * 64)
    assert row["dram_bytes_note"] is None


def test_gfx950_without_sized_counters_is_unknown_with_bounds_around_the_truth() -> None:
    # the same traffic as above: 10 x 128 B + 20 x 64 B + 30 x 32 B = 3520 B in 60 requests
    truth = 10 * 128 + 20 * 64 + 30 * 32
    row = _one(
        "gfx950",
        TCC_EA0_RDREQ_sum=60,
        TCC_EA0_RDREQ_32B_sum=30,
        TCC_BUBBLE_sum=0,
        TCC_EA0_WRREQ_sum=8,
        TCC_EA0_WRREQ_64B_sum=8,
    )
    assert _nan(row["dram_read_bytes"])
    assert row["dram_read_bytes_min"] == 30 * 32 + 30 * 64  # 2880
    assert row["dram_read_bytes_max"] == 30 * 32 + 30 * 128  # 4800
    assert row["dram_read_bytes_min"] <= truth <= row["dram_read_bytes_max"]
    note = str(row["dram_bytes_note"])
    assert "undetermined" in note
    assert "TCC_EA0_RDREQ_64B" in note and "TCC_EA0_RDREQ_128B" in note
    assert "#2501" in note
    _exact(row, "write", 8 * 64)  # writes do not depend on the read sizes


def test_gfx950_note_names_only_the_missing_sized_counter() -> None:
    row = _one("gfx950", TCC_EA0_RDREQ_sum=60, TCC_EA0_RDREQ_32B_sum=30, TCC_EA0_RDREQ_128B_sum=10)
    assert _nan(row["dram_read_bytes"])
    note = str(row["dram_bytes_note"])
    assert "TCC_EA0_RDREQ_64B_sum not collected" in note


def test_gfx11_gl2c_with_96_byte_requests() -> None:
    row = _one(
        "gfx1100",
        GL2C_EA_RDREQ_32B_sum=1,
        GL2C_EA_RDREQ_64B_sum=2,
        GL2C_EA_RDREQ_96B_sum=3,
        GL2C_EA_RDREQ_128B_sum=4,
        GL2C_MC_WRREQ_sum=10,
        GL2C_EA_WRREQ_64B_sum=4,
    )
    _exact(row, "read", 1 * 32 + 2 * 64 + 3 * 96 + 4 * 128)  # 960
    _exact(row, "write", 6 * 32 + 4 * 64)  # 448
    assert row["dram_bytes_note"] is None


def test_gfx1151_uses_the_gfx11_family() -> None:
    row = _one(
        "gfx1151",
        GL2C_EA_RDREQ_32B_sum=0,
        GL2C_EA_RDREQ_64B_sum=0,
        GL2C_EA_RDREQ_96B_sum=0,
        GL2C_EA_RDREQ_128B_sum=5,
        GL2C_MC_WRREQ_sum=3,
        GL2C_EA_WRREQ_64B_sum=3,
    )
    _exact(row, "read", 5 * 128)
    _exact(row, "write", 3 * 64)


def test_gfx11_missing_96_byte_counter_is_unknown_not_zero() -> None:
    """FETCH_SIZE on gfx10/11 includes 96-byte requests: without that counter the total is unknown."""
    row = _one(
        "gfx1100",
        GL2C_EA_RDREQ_32B_sum=1,
        GL2C_EA_RDREQ_64B_sum=2,
        GL2C_EA_RDREQ_128B_sum=4,
        GL2C_MC_WRREQ_sum=10,
        GL2C_EA_WRREQ_64B_sum=4,
    )
    assert _nan(row["dram_read_bytes"])
    assert "GL2C_EA_RDREQ_96B_sum" in str(row["dram_bytes_note"])
    _exact(row, "write", 448)


def test_gfx12_no_96_byte_counter_and_inferred_write_flagged() -> None:
    row = _one(
        "gfx1201",
        GL2C_EA_RDREQ_32B_sum=1,
        GL2C_EA_RDREQ_64B_sum=2,
        GL2C_EA_RDREQ_128B_sum=4,
        GL2C_EA_WRREQ_sum=10,
        GL2C_EA_WRREQ_64B_sum=4,
    )
    _exact(row, "read", 1 * 32 + 2 * 64 + 4 * 128)  # 672
    _exact(row, "write", 6 * 32 + 4 * 64)  # 448
    note = str(row["dram_bytes_note"])
    assert "inferred" in note and "unverified" in note
    assert not any("96B" in c for c in counters_for("gfx1201"))  # gfx12 has no 96-byte counter


def test_nvidia_dram_bytes_are_bytes() -> None:
    row = _one("sm_90", **{"dram__bytes_read.sum": 1234.0, "dram__bytes_write.sum": 5678.0})
    _exact(row, "read", 1234)
    _exact(row, "write", 5678)


# ---- spelling, missing counters, clamping ------------------------------------------------


def test_plain_and_sum_spellings_give_the_same_bytes() -> None:
    plain = _one("gfx942", TCC_EA0_RDREQ=10, TCC_BUBBLE=4, TCC_EA0_RDREQ_32B=2, TCC_EA0_WRREQ=6, TCC_EA0_WRREQ_64B=1)
    expected_read = 4 * 128 + 2 * 32 + 4 * 64  # 832
    expected_write = 5 * 32 + 1 * 64  # 224
    _exact(plain, "read", expected_read)
    _exact(plain, "write", expected_write)
    mixed = _one(
        "gfx942", TCC_EA0_RDREQ_sum=10, TCC_BUBBLE=4, TCC_EA0_RDREQ_32B_sum=2, TCC_EA0_WRREQ=6, TCC_EA0_WRREQ_64B_sum=1
    )
    _exact(mixed, "read", expected_read)
    _exact(mixed, "write", expected_write)


def test_sum_spelling_wins_over_plain_name() -> None:
    row = _one("gfx90a", TCC_EA_RDREQ_sum=10, TCC_EA_RDREQ=999, TCC_EA_RDREQ_32B_sum=0)
    assert row["dram_read_bytes"] == 10 * 64


def test_missing_counter_gives_none_and_a_note_naming_it() -> None:
    row = _one("gfx942", TCC_EA0_RDREQ_sum=10, TCC_EA0_RDREQ_32B_sum=2, TCC_EA0_WRREQ_sum=6, TCC_EA0_WRREQ_64B_sum=1)
    assert _nan(row["dram_read_bytes"])
    assert _nan(row["dram_read_bytes_min"]) and _nan(row["dram_read_bytes_max"])
    assert "TCC_BUBBLE_sum" in str(row["dram_bytes_note"])
    assert "not collected" in str(row["dram_bytes_note"])
    _exact(row, "write", 5 * 32 + 64)


def test_missing_write_counters_named_for_writes() -> None:
    row = _one("gfx90a", TCC_EA_RDREQ_sum=1, TCC_EA_RDREQ_32B_sum=1, TCC_EA_WRREQ_sum=3)
    _exact(row, "read", 32)
    assert _nan(row["dram_write_bytes"])
    note = str(row["dram_bytes_note"])
    assert "write bytes unknown" in note and "TCC_EA_WRREQ_64B_sum" in note
    assert "TCC_EA_WRREQ_sum," not in note  # only the missing one is named


def test_nan_counter_value_is_missing() -> None:
    row = _one("gfx90a", TCC_EA_RDREQ_sum=float("nan"), TCC_EA_RDREQ_32B_sum=1)
    assert _nan(row["dram_read_bytes"])
    assert "TCC_EA_RDREQ_sum" in str(row["dram_bytes_note"])


def test_gfx942_negative_64_byte_term_is_clamped() -> None:
    # RDREQ - BUBBLE - RDREQ_32B = 100 - 90 - 20 = -10 (counters from different passes)
    row = _one("gfx942", TCC_EA0_RDREQ_sum=100, TCC_BUBBLE_sum=90, TCC_EA0_RDREQ_32B_sum=20)
    clamped = 90 * 128 + 20 * 32  # 12160, the 64-byte term counted as 0
    assert row["dram_read_bytes"] == clamped
    assert row["dram_read_bytes_min"] == clamped
    assert row["dram_read_bytes_max"] == 100 * 128  # no request is larger than 128 B
    note = str(row["dram_bytes_note"])
    assert "negative" in note and "clamped" in note


def test_gfx942_bubble_above_rdreq_keeps_min_le_value_le_max() -> None:
    row = _one("gfx942", TCC_EA0_RDREQ_sum=10, TCC_BUBBLE_sum=20, TCC_EA0_RDREQ_32B_sum=0)
    assert row["dram_read_bytes"] == 20 * 128
    assert row["dram_read_bytes_min"] <= row["dram_read_bytes"] <= row["dram_read_bytes_max"]


# ---- real hardware numbers ----------------------------------------------------------------

#: AMD's vcopy sample on a real MI300X (rocprofiler-compute sample, see fixtures/PROVENANCE.md).
_MI300X_VCOPY = {
    "TCC_BUBBLE_sum": 65536,
    "TCC_EA0_RDREQ_sum": 65757,
    "TCC_EA0_RDREQ_32B_sum": 0,
    "TCC_EA0_WRREQ_sum": 131072,
    "TCC_EA0_WRREQ_64B_sum": 131072,
}


def test_mi300x_vcopy_read_and_write_within_1pct_of_8_mib() -> None:
    assert VCOPY_BYTES == 8_388_608
    row = _one("gfx942:sramecc+:xnack-", **_MI300X_VCOPY)
    assert row["dram_read_bytes"] == pytest.approx(VCOPY_BYTES, rel=0.01)
    assert row["dram_write_bytes"] == pytest.approx(VCOPY_BYTES, rel=0.01)
    assert row["dram_bytes_note"] is None


def test_mi300x_vcopy_64_byte_only_formula_gives_about_half() -> None:
    """RDREQ x 64 ignores that RDREQ counts 128-byte requests too (rocm-systems PR #1039)."""
    naive = _MI300X_VCOPY["TCC_EA0_RDREQ_sum"] * 64
    assert naive / VCOPY_BYTES == pytest.approx(0.5, abs=0.01)
    row = _one("gfx942", **_MI300X_VCOPY)
    assert row["dram_read_bytes"] / naive == pytest.approx(2.0, abs=0.02)


# ---- FETCH_SIZE / WRITE_SIZE fallback ------------------------------------------------------


def test_fetch_and_write_size_fallback_in_kb() -> None:
    row = _one("gfx942", FETCH_SIZE=8192.0, WRITE_SIZE=4.0)
    _exact(row, "read", 8192 * 1024)
    _exact(row, "write", 4 * 1024)
    note = str(row["dram_bytes_note"])
    assert "FETCH_SIZE" in note and "WRITE_SIZE" in note
    assert "#2501" not in note


def test_raw_counters_win_over_fetch_size() -> None:
    row = _one("gfx90a", TCC_EA_RDREQ_sum=2, TCC_EA_RDREQ_32B_sum=0, FETCH_SIZE=1000.0)
    _exact(row, "read", 128)
    assert "FETCH_SIZE" not in str(row["dram_bytes_note"] or "")


def test_gfx950_fetch_size_carries_the_caveat() -> None:
    row = _one("gfx950", FETCH_SIZE=3.0)
    _exact(row, "read", 3 * 1024)
    note = str(row["dram_bytes_note"])
    assert "FETCH_SIZE" in note and "#2501" in note and "TCC_BUBBLE" in note


def test_gfx950_bounds_are_kept_over_fetch_size() -> None:
    row = _one("gfx950", TCC_EA0_RDREQ_sum=60, TCC_EA0_RDREQ_32B_sum=30, FETCH_SIZE=2.8125)
    assert _nan(row["dram_read_bytes"])
    assert (row["dram_read_bytes_min"], row["dram_read_bytes_max"]) == (2880, 4800)


# ---- architectures -------------------------------------------------------------------------


def test_unknown_arch_is_none_with_a_note() -> None:
    row = _one("gfx803", TCC_EA_RDREQ_sum=10, TCC_EA_RDREQ_32B_sum=0)
    for col in OUTPUT_COLUMNS[:6]:
        assert _nan(row[col])
    assert row["dram_formula"] is None
    note = str(row["dram_bytes_note"])
    assert "no DRAM byte formula" in note and "gfx803" in note


def test_missing_arch_is_named_unknown() -> None:
    row = _one("", TCC_EA_RDREQ_sum=10)
    assert _nan(row["dram_read_bytes"])
    assert "'unknown'" in str(row["dram_bytes_note"])


def test_unknown_arch_keeps_fetch_size_and_says_so() -> None:
    row = _one("gfx803", FETCH_SIZE=2.0)
    assert row["dram_read_bytes"] == 2048
    assert _nan(row["dram_write_bytes"])
    note = str(row["dram_bytes_note"])
    assert "FETCH_SIZE" in note and "no DRAM byte formula" in note


def test_mixed_architectures_in_one_frame_keep_their_rows() -> None:
    wide = pd.DataFrame(
        {
            "TCC_EA_RDREQ_sum": [4.0, np.nan, np.nan],
            "TCC_EA_RDREQ_32B_sum": [4.0, np.nan, np.nan],
            "TCC_EA0_RDREQ_sum": [np.nan, 3.0, np.nan],
            "TCC_BUBBLE_sum": [np.nan, 3.0, np.nan],
            "TCC_EA0_RDREQ_32B_sum": [np.nan, 0.0, np.nan],
            "dram__bytes_read.sum": [np.nan, np.nan, 77.0],
        },
        index=[30, 10, 20],
    )
    arch = pd.Series(["gfx90a", "gfx942:sramecc+:xnack-", "sm_89"], index=[30, 10, 20])
    out = dram_bytes(wide, arch)
    assert list(out.index) == [30, 10, 20]
    assert list(out.columns) == list(OUTPUT_COLUMNS)
    assert out["dram_read_bytes"].tolist() == [4 * 32, 3 * 128, 77]


def test_empty_frame() -> None:
    out = dram_bytes(pd.DataFrame(index=pd.Index([], dtype="int64")), pd.Series([], dtype=object))
    assert len(out) == 0
    assert list(out.columns) == list(OUTPUT_COLUMNS)


@pytest.mark.parametrize(
    ("arch", "expected"),
    [
        ("gfx90a", "tcc_ea"),
        ("gfx908", "tcc_ea"),
        ("gfx940", "tcc_ea0_bubble"),
        ("gfx942", "tcc_ea0_bubble"),
        ("gfx942:sramecc+:xnack-", "tcc_ea0_bubble"),
        ("GFX942", "tcc_ea0_bubble"),
        ("gfx950", "tcc_ea0_sized"),
        ("gfx1030", "gl2c_mc"),
        ("gfx1100", "gl2c_mc"),
        ("gfx1151", "gl2c_mc"),
        ("gfx1201", "gl2c_ea"),
        ("sm_90", "nvidia_dram"),
        ("gfx803", None),
        ("gfx906", None),  # its FETCH_SIZE adds RDATA1_SIZE, which the gfx90a formula lacks
        ("", None),
        (None, None),
    ],
)
def test_family(arch: str | None, expected: str | None) -> None:
    assert family(arch) == expected


def test_base_arch() -> None:
    assert base_arch("gfx942:sramecc+:xnack-") == "gfx942"
    assert base_arch(" GFX90A:xnack+") == "gfx90a"
    assert base_arch(None) == ""


def test_counters_for() -> None:
    assert set(counters_for("gfx942:sramecc+:xnack-")) == {
        "TCC_EA0_RDREQ_sum",
        "TCC_EA0_RDREQ_32B_sum",
        "TCC_BUBBLE_sum",
        "TCC_EA0_WRREQ_sum",
        "TCC_EA0_WRREQ_64B_sum",
    }
    assert {"TCC_EA0_RDREQ_64B_sum", "TCC_EA0_RDREQ_128B_sum"} <= set(counters_for("gfx950"))
    assert "TCC_BUBBLE_sum" not in counters_for("gfx950")
    assert "GL2C_EA_RDREQ_96B_sum" in counters_for("gfx1100")
    assert "GL2C_EA_RDREQ_96B_sum" not in counters_for("gfx1201")
    assert counters_for("gfx803") == ()
    assert counters_for(None) == ()


@pytest.mark.parametrize("arch", ["gfx90a", "gfx942", "gfx950", "gfx1100", "gfx1201"])
def test_counters_for_exist_in_rocprofiler_sdk_definitions(arch: str) -> None:
    defs_file = fixture_path("counter-defs", "counter_defs.yaml")
    doc = yaml.safe_load(defs_file.read_text(encoding="utf-8"))["rocprofiler-sdk"]["counters"]
    archs_of = {c["name"]: {a for d in c["definitions"] for a in d["architectures"]} for c in doc}
    for name in counters_for(arch):
        assert arch in archs_of.get(name, set()), f"{name} is not defined for {arch}"


def test_counters_for_are_enough_for_exact_bytes() -> None:
    """Collecting exactly counters_for(arch) gives an exact read and write for every family."""
    for arch in ("gfx90a", "gfx942", "gfx950", "gfx1100", "gfx1201", "sm_90"):
        row = _one(arch, **dict.fromkeys(counters_for(arch), 1.0))
        assert not _nan(row["dram_read_bytes"]), arch
        assert not _nan(row["dram_write_bytes"]), arch


# ---- properties ----------------------------------------------------------------------------

_count = st.integers(min_value=0, max_value=10**9)


@settings(deadline=None, max_examples=60)
@given(st.lists(st.tuples(_count, _count, _count), min_size=1, max_size=8))
def test_gfx942_property_matches_hand_formula(rows: list[tuple[int, int, int]]) -> None:
    # r >= b + r32 by construction: r = b + r32 + n64
    b = [t[0] for t in rows]
    r32 = [t[1] for t in rows]
    n64 = [t[2] for t in rows]
    r = [x + y + z for x, y, z in zip(b, r32, n64, strict=True)]
    wide = pd.DataFrame({"TCC_EA0_RDREQ_sum": r, "TCC_BUBBLE_sum": b, "TCC_EA0_RDREQ_32B_sum": r32}, dtype="float64")
    out = dram_bytes(wide, pd.Series("gfx942", index=wide.index))
    for i in range(len(rows)):
        expected = 128 * b[i] + 32 * r32[i] + 64 * (r[i] - b[i] - r32[i])
        assert out["dram_read_bytes"].iloc[i] == expected
        assert out["dram_read_bytes_min"].iloc[i] <= expected <= out["dram_read_bytes_max"].iloc[i]


@settings(deadline=None, max_examples=60)
@given(_count, _count, _count)
def test_gfx942_property_any_counts_keep_bounds_ordered(r: int, b: int, r32: int) -> None:
    row = _one("gfx942", TCC_EA0_RDREQ_sum=r, TCC_BUBBLE_sum=b, TCC_EA0_RDREQ_32B_sum=r32)
    assert row["dram_read_bytes_min"] <= row["dram_read_bytes"] <= row["dram_read_bytes_max"]
    assert row["dram_read_bytes"] >= 0


@settings(deadline=None, max_examples=60)
@given(_count, _count, _count)
def test_gfx950_property_bounds_contain_the_sized_value(n128: int, n64: int, n32: int) -> None:
    truth = 128 * n128 + 64 * n64 + 32 * n32
    row = _one("gfx950", TCC_EA0_RDREQ_sum=n128 + n64 + n32, TCC_EA0_RDREQ_32B_sum=n32)
    assert _nan(row["dram_read_bytes"])
    assert row["dram_read_bytes_min"] <= truth <= row["dram_read_bytes_max"]
