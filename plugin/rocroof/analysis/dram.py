"""Hardware counters -> DRAM (HBM) read and write bytes, per GPU architecture.

Every formula names its source. Inputs are counter values summed over all hardware
instances of one dispatch (rocprofv3 CSV already sums them; ``X_sum`` is rocprofiler's
``reduce(X,sum)``): both spellings are accepted, ``X_sum`` first.

Unknown is not zero: when a counter a formula needs is missing, or the data cannot settle a
term, the byte count is None with ``_min``/``_max`` bounds where the data allows them and a
``dram_bytes_note`` saying why.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

OUTPUT_COLUMNS = (
    "dram_read_bytes",
    "dram_read_bytes_min",
    "dram_read_bytes_max",
    "dram_write_bytes",
    "dram_write_bytes_min",
    "dram_write_bytes_max",
    "dram_formula",
    "dram_bytes_note",
)
#: The byte columns of :data:`OUTPUT_COLUMNS` (float64, NaN = unknown); the others are text.
BYTE_COLUMNS = OUTPUT_COLUMNS[:6]


def base_arch(arch: str | None) -> str:
    """``gfx942:sramecc+:xnack-`` -> ``gfx942``; lower-cased; ``""`` for None."""
    if not arch:
        return ""
    return str(arch).split(":", 1)[0].strip().lower()


def family(arch: str | None) -> str | None:
    """The DRAM formula family of a GPU architecture, or None when rocroof has none.

    >>> family("gfx942"), family("gfx950"), family("gfx1151"), family("gfx1201"), family("sm_90")
    ('tcc_ea0_bubble', 'tcc_ea0_sized', 'gl2c_mc', 'gl2c_ea', 'nvidia_dram')
    """
    a = base_arch(arch)
    if a in ("gfx9", "gfx900", "gfx908", "gfx90a"):
        return "tcc_ea"
    if a in ("gfx940", "gfx941", "gfx942"):
        return "tcc_ea0_bubble"
    if a == "gfx950":
        return "tcc_ea0_sized"
    if a.startswith("gfx10") or a.startswith("gfx11"):
        return "gl2c_mc"
    if a.startswith("gfx12"):
        return "gl2c_ea"
    if a.startswith("sm_") or a.startswith("nvidia"):
        return "nvidia_dram"
    return None


def counters_for(arch: str | None) -> tuple[str, ...]:
    """The counters to collect for exact DRAM bytes on ``arch`` (rocprofv3 names).

    Raises nothing; returns ``()`` for an architecture without a formula.
    """
    return {
        "tcc_ea": ("TCC_EA_RDREQ_sum", "TCC_EA_RDREQ_32B_sum", "TCC_EA_WRREQ_sum", "TCC_EA_WRREQ_64B_sum"),
        "tcc_ea0_bubble": (
            "TCC_EA0_RDREQ_sum",
            "TCC_EA0_RDREQ_32B_sum",
            "TCC_BUBBLE_sum",
            "TCC_EA0_WRREQ_sum",
            "TCC_EA0_WRREQ_64B_sum",
        ),
        "tcc_ea0_sized": (
            "TCC_EA0_RDREQ_32B_sum",
            "TCC_EA0_RDREQ_64B_sum",
            "TCC_EA0_RDREQ_128B_sum",
            "TCC_EA0_RDREQ_sum",
            "TCC_EA0_WRREQ_sum",
            "TCC_EA0_WRREQ_64B_sum",
        ),
        "gl2c_mc": (
            "GL2C_EA_RDREQ_32B_sum",
            "GL2C_EA_RDREQ_64B_sum",
            "GL2C_EA_RDREQ_96B_sum",
            "GL2C_EA_RDREQ_128B_sum",
            "GL2C_MC_WRREQ_sum",
            "GL2C_EA_WRREQ_64B_sum",
        ),
        "gl2c_ea": (
            "GL2C_EA_RDREQ_32B_sum",
            "GL2C_EA_RDREQ_64B_sum",
            "GL2C_EA_RDREQ_128B_sum",
            "GL2C_EA_WRREQ_sum",
            "GL2C_EA_WRREQ_64B_sum",
        ),
        "nvidia_dram": ("dram__bytes_read.sum", "dram__bytes_write.sum"),
    }.get(family(arch) or "", ())


def _bare(name: str) -> str:
    return name[:-4] if name.endswith("_sum") else name


#: Every counter a formula reads (``X`` and ``X_sum`` alike), and FETCH_SIZE / WRITE_SIZE.
_INPUT_BASES = frozenset(
    _bare(n) for arch in ("gfx90a", "gfx942", "gfx950", "gfx1100", "gfx1201", "sm_90") for n in counters_for(arch)
) | {"FETCH_SIZE", "WRITE_SIZE"}


def is_input_counter(name: str) -> bool:
    """True for a counter that some DRAM formula reads (``TCC_EA0_RDREQ_sum``, ``FETCH_SIZE``...).

    :func:`dram_bytes` needs only these columns: the pipeline leaves the other counters out of
    the wide table it builds.
    """
    return _bare(str(name)) in _INPUT_BASES


@dataclass
class _Side:
    value: pd.Series
    low: pd.Series
    high: pd.Series
    note: pd.Series


class _Counters:
    """Counter lookup over a wide frame: ``X_sum`` if present, else ``X``."""

    def __init__(self, wide: pd.DataFrame) -> None:
        self.wide = wide
        self.n = len(wide)

    def get(self, name: str) -> pd.Series:
        base = name[:-4] if name.endswith("_sum") else name
        out = pd.Series(np.nan, index=self.wide.index, dtype="float64")
        for candidate in (base + "_sum", base):
            if candidate in self.wide.columns:
                out = out.fillna(self.wide[candidate].astype("float64"))
        return out

    def missing(self, names: tuple[str, ...]) -> pd.Series:
        """Per row: the comma-joined names of missing counters ("" when all present).

        Computed per combination of missing counters (a bit mask per row), not per row.
        """
        if not names:
            return pd.Series("", index=self.wide.index)
        mask = np.zeros(self.n, dtype=np.int64)
        for bit, name in enumerate(names):
            mask |= self.get(name).isna().to_numpy(dtype=np.int64) << bit
        combos, which = np.unique(mask, return_inverse=True)
        texts = np.array(
            [",".join(n for bit, n in enumerate(names) if int(combo) >> bit & 1) for combo in combos.tolist()] + [""],
            dtype=object,
        )[:-1]
        return pd.Series(texts[which.reshape(-1)], index=self.wide.index, dtype=object)


def _nan(index: pd.Index) -> pd.Series:
    return pd.Series(np.nan, index=index, dtype="float64")


def _exact(value: pd.Series, note: pd.Series) -> _Side:
    return _Side(value, value.copy(), value.copy(), note)


def _need(c: _Counters, names: tuple[str, ...], value: pd.Series, what: str) -> _Side:
    """Blank out rows whose inputs are missing, with a note naming them."""
    miss = c.missing(names)
    has = miss == ""
    value = value.where(has)
    texts = {
        m: (
            ""
            if not m
            else f"{what} unknown: counter(s) {m.replace(',', ', ')} not collected for the dispatch "
            "(absent from the capture, or no counter-pass row matched it)"
        )
        for m in pd.unique(miss)
    }
    return _exact(value, miss.map(texts))


def _tcc_ea(c: _Counters) -> tuple[_Side, _Side, str]:
    """MI100/MI200 (gfx908/gfx90a).

    Source: rocprofiler-sdk ``counter_defs.yaml`` FETCH_SIZE /
    WRITE_SIZE for gfx90a, and rocprofiler-compute ``roofline_calc.py`` HBM bytes (MI200).
    """
    r, r32 = c.get("TCC_EA_RDREQ_sum"), c.get("TCC_EA_RDREQ_32B_sum")
    w, w64 = c.get("TCC_EA_WRREQ_sum"), c.get("TCC_EA_WRREQ_64B_sum")
    read = _need(c, ("TCC_EA_RDREQ_sum", "TCC_EA_RDREQ_32B_sum"), r32 * 32 + (r - r32) * 64, "read bytes")
    write = _need(c, ("TCC_EA_WRREQ_sum", "TCC_EA_WRREQ_64B_sum"), (w - w64) * 32 + w64 * 64, "write bytes")
    return read, write, "gfx90a: 32*RDREQ_32B + 64*(RDREQ-RDREQ_32B); 32*(WRREQ-WRREQ_64B) + 64*WRREQ_64B"


def _ea0_write(c: _Counters) -> _Side:
    w, w64 = c.get("TCC_EA0_WRREQ_sum"), c.get("TCC_EA0_WRREQ_64B_sum")
    return _need(c, ("TCC_EA0_WRREQ_sum", "TCC_EA0_WRREQ_64B_sum"), (w - w64) * 32 + w64 * 64, "write bytes")


def _tcc_ea0_bubble(c: _Counters) -> tuple[_Side, _Side, str]:
    """MI300 (gfx940/941/942).

    ``TCC_EA0_RDREQ`` counts 32-, 64- and 128-byte requests
    (rocm-systems PR #1039) and ``TCC_BUBBLE`` the 128-byte ones, so
    read = 128*BUBBLE + 32*RDREQ_32B + 64*(RDREQ - BUBBLE - RDREQ_32B). Source:
    rocprofiler-sdk ``counter_defs.yaml`` FETCH_SIZE (gfx940/941/942) and rocprofiler-compute
    ``roofline_calc.py``. The 64-byte term can come out negative on MI300 (rocprofiler-compute
    CHANGELOG 3.3.0, which clamps it): rocroof clamps too, says so in the note, and widens
    the upper bound to 128 bytes per request.
    """
    names = ("TCC_EA0_RDREQ_sum", "TCC_BUBBLE_sum", "TCC_EA0_RDREQ_32B_sum")
    r, b, r32 = (c.get(n) for n in names)
    t64 = r - b - r32
    negative = t64 < 0
    read = _need(c, names, b * 128 + r32 * 32 + t64.clip(lower=0) * 64, "read bytes")
    # no request is larger than 128 B; when BUBBLE alone exceeds RDREQ the clamped value is
    # already above that, and stays the upper bound so that min <= value <= max holds
    read.high = read.value.where(~negative, np.maximum(r * 128, read.value))
    read.note = read.note.where(
        ~negative,
        "negative 64-byte read term (RDREQ - BUBBLE - RDREQ_32B < 0, counters from different passes "
        "disagree): clamped to 0 as rocprofiler-compute does; upper bound assumes 128 B per request",
    )
    return read, _ea0_write(c), "gfx942: 128*BUBBLE + 32*RDREQ_32B + 64*(RDREQ-BUBBLE-RDREQ_32B); EA0 writes"


def _tcc_ea0_sized(c: _Counters) -> tuple[_Side, _Side, str]:
    """MI350/MI355 (gfx950).

    read = 128*RDREQ_128B + 64*RDREQ_64B + 32*RDREQ_32B. Source:
    rocprofiler-sdk ``counter_defs.yaml`` FETCH_SIZE for gfx950 after rocm-systems PR #2501
    ("TCC_BUBBLE_sum was a workaround for MI300 and was fixed in MI350 with introduction of
    TCC_EA0_RDREQ_128B"). Without the sized counters the request size is not recorded:
    the read bytes are unknown, bounded by 64..128 bytes per non-32-byte request.
    """
    r128, r64, r32, r = (
        c.get("TCC_EA0_RDREQ_128B_sum"),
        c.get("TCC_EA0_RDREQ_64B_sum"),
        c.get("TCC_EA0_RDREQ_32B_sum"),
        c.get("TCC_EA0_RDREQ_sum"),
    )
    sized_names = ("TCC_EA0_RDREQ_128B_sum", "TCC_EA0_RDREQ_64B_sum", "TCC_EA0_RDREQ_32B_sum")
    sized = r128.notna() & r64.notna() & r32.notna()
    read = _need(c, sized_names, r128 * 128 + r64 * 64 + r32 * 32, "read bytes")
    bounded = ~sized & r.notna() & r32.notna()
    read.low = read.low.where(~bounded, r32 * 32 + (r - r32) * 64)
    read.high = read.high.where(~bounded, r32 * 32 + (r - r32) * 128)
    missing = c.missing(sized_names).str.replace(",", ", ")
    read.note = read.note.where(
        ~bounded,
        "read bytes undetermined on gfx950: "
        + missing
        + " not collected, so the request size is unknown (TCC_BUBBLE does not count 128-byte reads on gfx950, "
        "rocm-systems PR #2501); bounds assume 64..128 B per non-32-byte request; collect "
        "TCC_EA0_RDREQ_64B_sum and TCC_EA0_RDREQ_128B_sum",
    )
    return read, _ea0_write(c), "gfx950: 128*RDREQ_128B + 64*RDREQ_64B + 32*RDREQ_32B; EA0 writes"


def _gl2c_mc(c: _Counters) -> tuple[_Side, _Side, str]:
    """RDNA2/RDNA3/RDNA3.5 (gfx10xx, gfx110x, gfx115x).

    Source: rocprofiler-sdk
    ``counter_defs.yaml`` FETCH_SIZE / WRITE_SIZE for gfx10/gfx11 (gfx115x in later versions).
    """
    # the 96-byte requests are part of FETCH_SIZE here: a missing 96B counter is unknown, not 0
    sizes = {
        "GL2C_EA_RDREQ_32B_sum": 32,
        "GL2C_EA_RDREQ_64B_sum": 64,
        "GL2C_EA_RDREQ_96B_sum": 96,
        "GL2C_EA_RDREQ_128B_sum": 128,
    }
    total = sum((c.get(n) * s for n, s in sizes.items()), _nan(c.wide.index).fillna(0.0))
    read = _need(c, tuple(sizes), total, "read bytes")
    w, w64 = c.get("GL2C_MC_WRREQ_sum"), c.get("GL2C_EA_WRREQ_64B_sum")
    write = _need(c, ("GL2C_MC_WRREQ_sum", "GL2C_EA_WRREQ_64B_sum"), (w - w64) * 32 + w64 * 64, "write bytes")
    return (
        read,
        write,
        "gfx10/11: sum of GL2C_EA_RDREQ_{32,64,96,128}B * size; 32*(MC_WRREQ-EA_WRREQ_64B) + 64*EA_WRREQ_64B",
    )


def _gl2c_ea(c: _Counters) -> tuple[_Side, _Side, str]:
    """RDNA4 (gfx12xx).

    Reads: rocprofiler-sdk ``counter_defs.yaml`` FETCH_SIZE for gfx12.
    Writes: no WRITE_SIZE exists for gfx12 upstream; rocroof infers
    32*(GL2C_EA_WRREQ - GL2C_EA_WRREQ_64B) + 64*GL2C_EA_WRREQ_64B by analogy with gfx11
    (unverified on hardware, said in the note).
    """
    sizes = {"GL2C_EA_RDREQ_32B_sum": 32, "GL2C_EA_RDREQ_64B_sum": 64, "GL2C_EA_RDREQ_128B_sum": 128}
    total = sum((c.get(n) * s for n, s in sizes.items()), _nan(c.wide.index).fillna(0.0))
    read = _need(c, tuple(sizes), total, "read bytes")
    w, w64 = c.get("GL2C_EA_WRREQ_sum"), c.get("GL2C_EA_WRREQ_64B_sum")
    write = _need(c, ("GL2C_EA_WRREQ_sum", "GL2C_EA_WRREQ_64B_sum"), (w - w64) * 32 + w64 * 64, "write bytes")
    write.note = write.note.where(
        write.value.isna(), "write formula inferred for gfx12 (no upstream WRITE_SIZE definition); unverified"
    )
    return read, write, "gfx12: sum of GL2C_EA_RDREQ_{32,64,128}B * size; inferred 32/64 B write split"


def _nvidia(c: _Counters) -> tuple[_Side, _Side, str]:
    """NVIDIA: Nsight Compute ``dram__bytes_read.sum`` / ``dram__bytes_write.sum`` (bytes)."""
    read = _need(c, ("dram__bytes_read.sum",), c.get("dram__bytes_read.sum"), "read bytes")
    write = _need(c, ("dram__bytes_write.sum",), c.get("dram__bytes_write.sum"), "write bytes")
    return read, write, "ncu: dram__bytes_read.sum; dram__bytes_write.sum"


_FAMILIES: dict[str, Callable[[_Counters], tuple[_Side, _Side, str]]] = {
    "tcc_ea": _tcc_ea,
    "tcc_ea0_bubble": _tcc_ea0_bubble,
    "tcc_ea0_sized": _tcc_ea0_sized,
    "gl2c_mc": _gl2c_mc,
    "gl2c_ea": _gl2c_ea,
    "nvidia_dram": _nvidia,
}


def _fetch_write_size(c: _Counters, side: _Side, name: str, arch: str) -> _Side:
    """Fill rows the raw formula left unknown from FETCH_SIZE / WRITE_SIZE (KB, x1024)."""
    kb = c.get(name)
    use = side.value.isna() & side.low.isna() & kb.notna()
    if not bool(use.any()):
        return side
    note = f"from {name} (KB x 1024)"
    if base_arch(arch) == "gfx950" and name == "FETCH_SIZE":
        note += (
            "; before rocm-systems PR #2501 FETCH_SIZE on gfx950 was computed from TCC_BUBBLE, "
            "which reads 0 there, so it may undercount up to 2x"
        )
    return _Side(
        side.value.where(~use, kb * 1024),
        side.low.where(~use, kb * 1024),
        side.high.where(~use, kb * 1024),
        side.note.where(~use, note),
    )


def dram_bytes(wide: pd.DataFrame, arch: pd.Series) -> pd.DataFrame:
    """DRAM read/write bytes per dispatch.

    Args:
        wide: one row per dispatch, one float column per counter (NaN = not collected).
        arch: the gfx/sm architecture of each row's agent (same index as ``wide``).

    Returns:
        A frame with :data:`OUTPUT_COLUMNS` (bytes as float64; NaN = unknown), same index.
    """
    out = pd.DataFrame(index=wide.index, columns=list(OUTPUT_COLUMNS), dtype=object)
    for col in BYTE_COLUMNS:
        out[col] = np.nan
    out = out.astype({c: "float64" for c in BYTE_COLUMNS})
    out["dram_formula"] = None
    out["dram_bytes_note"] = None
    arch = arch.reindex(wide.index).fillna("")
    for arch_name, idx in arch.groupby(arch).groups.items():
        sub = _Counters(wide.loc[idx])
        fam = family(str(arch_name))
        if fam is None:
            read = _Side(_nan(idx), _nan(idx), _nan(idx), pd.Series("", index=idx))
            write = _Side(_nan(idx), _nan(idx), _nan(idx), pd.Series("", index=idx))
            formula = ""
        else:
            read, write, formula = _FAMILIES[fam](sub)
        read = _fetch_write_size(sub, read, "FETCH_SIZE", str(arch_name))
        write = _fetch_write_size(sub, write, "WRITE_SIZE", str(arch_name))
        out.loc[idx, "dram_read_bytes"] = read.value
        out.loc[idx, "dram_read_bytes_min"] = read.low
        out.loc[idx, "dram_read_bytes_max"] = read.high
        out.loc[idx, "dram_write_bytes"] = write.value
        out.loc[idx, "dram_write_bytes_min"] = write.low
        out.loc[idx, "dram_write_bytes_max"] = write.high
        # one note per combination of the two sides' notes (a handful), not per dispatch
        r_codes, r_texts = pd.factorize(read.note.to_numpy(dtype=object), use_na_sentinel=False)
        w_codes, w_texts = pd.factorize(write.note.to_numpy(dtype=object), use_na_sentinel=False)
        unknown = np.isnan(read.value.to_numpy(dtype=np.float64)) | np.isnan(write.value.to_numpy(dtype=np.float64))
        no_formula = unknown if fam is None else np.zeros(len(idx), dtype=bool)
        key = (r_codes.astype(np.int64) * max(len(w_texts), 1) + w_codes) * 2 + no_formula
        combos, which = np.unique(key, return_inverse=True)
        texts: list[str | None] = []
        for combo in combos.tolist():
            r_note, w_note = r_texts[combo // 2 // max(len(w_texts), 1)], w_texts[combo // 2 % max(len(w_texts), 1)]
            parts = [n for n in (r_note, w_note) if n]
            if combo % 2:
                # keep a FETCH_SIZE/WRITE_SIZE note of the side that is known
                parts.append(
                    f"no DRAM byte formula for architecture {arch_name or 'unknown'!r} (known: gfx908, gfx90a, "
                    "gfx942, gfx950, gfx10/11/12, NVIDIA sm_*); use --arch if it was not recorded"
                )
            texts.append("; ".join(dict.fromkeys(parts)) or None)
        lookup = np.array([*texts, None], dtype=object)[:-1]
        out.loc[idx, "dram_bytes_note"] = pd.Series(lookup[which.reshape(-1)], index=idx, dtype=object)
        out.loc[idx, "dram_formula"] = formula or None
    return out
