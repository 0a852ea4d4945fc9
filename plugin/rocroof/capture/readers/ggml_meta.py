"""Reader for ggml op metadata JSON: AMD's fork ``GGML_ROOFLINE_OUT`` and rocroof's sidecar.

Schema: AMD-Ecosystem/llama.cpp ``ggml/src/ggml-cuda/ggml-cuda-roofline.cpp`` (PRs #33, #48,
#50, #53, #66; summarised in ``shared/reference/llamacpp-roofline.md`` §1.6-1.8). The top level
is ``{"device": "gfx1151", "total_gpu_time_us": ..., "rows": [...]}``; rocroof's llama.cpp hook
writes the same row keys, adds ``"source"`` and omits ``kernels``. Rows come in arbitrary order
(the fork iterates an ``unordered_map``) and are sorted by ``invocation`` here. The older key
names ``dst_sid``, ``src_ids``, ``src_sids`` (fork commit ``302448a``) are accepted.

Frames returned (units in names; ids are host pointers as unsigned 64-bit integers, stored as
signed 64-bit two's complement when above 2**63-1; integer columns are nullable ``Int64``):

* ``ops``: invocation, op, node_name, op_list, is_fused, dtype, quant, ne, src_ne, src_types,
  op_params (JSON text), metadata_bytes, dst_bytes, dst_storage_id, out_storage_id, m, n, k,
  n_experts, top_k, experts_used, tokens_per_expert (JSON text or None), gpu_time_ns.
* ``nodes``: invocation, node_index (0 = head), ggml_op, dtype, quant, ne, src_ne, src_types,
  op_params, dst_bytes, dst_storage_id, m, n, k, n_experts, top_k.
* ``operands``: invocation, node_index (-1 for the group's graph inputs/outputs), role
  (``src``/``dst``/``in``/``out``), operand_index, name, ggml_type, ne (JSON text), bytes,
  tensor_id, storage_id.
* ``kernels``: invocation, kernel_index, kernel_name, gpu_time_ns (from ``gpu_time_us``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from ...errors import ParseError
from ...fileio import read_text
from ...records import Note, OpMetadata

#: Refuse metadata files larger than this (decompressed), bytes.
MAX_JSON_BYTES = 1 << 30

_ALIASES = {
    "dst_storage_id": ("dst_storage_id", "dst_sid"),
    "src_tensor_ids": ("src_tensor_ids", "src_ids"),
    "src_storage_ids": ("src_storage_ids", "src_sids"),
}

#: Columns of the frames of :class:`~rocroof.records.OpMetadata` (also present when empty).
OPS_COLUMNS = (
    "invocation",
    "op",
    "node_name",
    "op_list",
    "is_fused",
    "dtype",
    "quant",
    "ne",
    "src_ne",
    "src_types",
    "op_params",
    "dst_bytes",
    "dst_storage_id",
    "m",
    "n",
    "k",
    "n_experts",
    "top_k",
    "metadata_bytes",
    "out_storage_id",
    "experts_used",
    "tokens_per_expert",
    "gpu_time_ns",
)
NODE_COLUMNS = (
    "invocation",
    "node_index",
    "ggml_op",
    "dtype",
    "quant",
    "ne",
    "src_ne",
    "src_types",
    "op_params",
    "dst_bytes",
    "dst_storage_id",
    "m",
    "n",
    "k",
    "n_experts",
    "top_k",
)
OPERAND_COLUMNS = (
    "invocation",
    "node_index",
    "role",
    "operand_index",
    "name",
    "ggml_type",
    "ne",
    "bytes",
    "tensor_id",
    "storage_id",
)
KERNEL_COLUMNS = ("invocation", "kernel_index", "kernel_name", "gpu_time_ns")


#: Integer columns, kept as nullable ``Int64``: with a missing value pandas would make them
#: float64, which rounds ids above 2**53 (two's complement ids are near -2**63).
_INT_COLUMNS = frozenset(
    {
        "invocation",
        "node_index",
        "operand_index",
        "kernel_index",
        "dst_bytes",
        "dst_storage_id",
        "out_storage_id",
        "m",
        "n",
        "k",
        "n_experts",
        "top_k",
        "metadata_bytes",
        "experts_used",
        "bytes",
        "tensor_id",
        "storage_id",
    }
)


def _frame(records: list[dict[str, Any]], columns: tuple[str, ...]) -> pd.DataFrame:
    """Records as a frame with fixed columns (also when empty), in invocation order.

    The sort is stable, so the order within one invocation (nodes, operands, kernels) is kept.
    """
    data = {
        c: pd.array([r[c] for r in records], dtype="Int64")
        if c in _INT_COLUMNS
        else pd.Series([r[c] for r in records], dtype=object)
        for c in columns
    }
    df = pd.DataFrame(data, columns=list(columns))
    if "gpu_time_ns" in df.columns:
        df["gpu_time_ns"] = df["gpu_time_ns"].astype("float64")
    if "is_fused" in df.columns:
        df["is_fused"] = df["is_fused"].astype(bool)
    return df.sort_values("invocation", kind="stable").reset_index(drop=True) if len(df) else df


def _head(path: Path) -> bytes | None:
    """The first 64 KiB of ``path`` (decompressed when gzip, even when cut short), without a UTF-8 byte order mark."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(1 << 16)
    except OSError:
        return None
    if head[:2] == b"\x1f\x8b":
        import zlib

        # what the start decompresses to, even when the file is cut short (read_metadata then names it)
        try:
            head = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(head, 1 << 16)
        except zlib.error:
            return None
    return head.removeprefix(b"\xef\xbb\xbf")


def looks_like_metadata(path: Path) -> bool:
    """Cheap check: a JSON file whose start mentions ``"rows"`` or ``"ggml_op"``."""
    head = _head(path)
    return head is not None and head.lstrip().startswith(b"{") and (b'"rows"' in head or b'"ggml_op"' in head)


#: What an op metadata file must hold, for messages.
EXPECTED = "expected ggml op metadata: a JSON object with a 'rows' list (from GGML_CUDA_OP_META or GGML_ROOFLINE_OUT)"


def _invalid_json(path: Path, exc: json.JSONDecodeError) -> ParseError:
    """``path:LINE: invalid JSON at column C: <what the parser expected>; <what the file must hold>``."""
    ends = " (the file ends there: cut short?)" if not exc.doc[exc.pos :].strip() else ""
    return ParseError(path, f"invalid JSON at column {exc.colno}: {exc.msg}{ends}; {EXPECTED}", exc.lineno)


def check_json(path: Path) -> None:
    """Parse ``path`` as JSON, only to name where it is broken (an attachment refused for its content).

    Raises:
        ParseError: the text is not valid JSON (with the line and column of the first error and
            what the parser expected there), not UTF-8, or nested too deeply.
    """
    text = read_text(path, limit_bytes=MAX_JSON_BYTES)
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        raise _invalid_json(path, exc) from exc
    except RecursionError as exc:  # json.loads recurses once per nesting level
        raise ParseError(path, f"invalid JSON: nested too deeply; {EXPECTED}") from exc


def starts_like_json(path: Path) -> bool:
    """Cheap check: the file's text starts with ``{`` or ``[`` (after white space)."""
    head = _head(path)
    return head is not None and head.lstrip()[:1] in (b"{", b"[")


def _u64(value: Any, where: str, path: Path) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ParseError(path, f"{where}: expected an unsigned integer id, got {type(value).__name__}")
    if value < 0 or value >= 2**64:
        raise ParseError(path, f"{where}: id {value} is outside the unsigned 64-bit range")
    return value - 2**64 if value >= 2**63 else value


def _int(value: Any, where: str, path: Path, default: int | None = None) -> int | None:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise ParseError(path, f"{where}: expected an integer, got {json.dumps(value)[:40]}")
    if abs(value) >= 2**63:
        raise ParseError(path, f"{where}: {value} does not fit in 64 bits")
    return value


def _count(value: Any, where: str, path: Path) -> int | None:
    """A size or count (bytes, M/N/K, experts): an integer from 0 to 2**62."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**62:
        raise ParseError(path, f"{where}: expected a count from 0 to 2**62, got {json.dumps(value)[:40]}")
    return value


#: ggml tensors have 4 dimensions (GGML_MAX_DIMS in ggml.h); each fits in 63 bits, but a graph's
#: tensors sizes stay far below 2**40 elements per dimension.
_MAX_DIMS, _MAX_EXTENT = 4, 2**40


def _shape(value: Any, where: str, path: Path) -> str | None:
    """A tensor shape ``ne``: up to 4 integers from 0 to 2**40, as compact JSON text."""
    if value is None:
        return None
    if (
        not isinstance(value, list)
        or len(value) > _MAX_DIMS
        or not all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x < _MAX_EXTENT for x in value)
    ):
        raise ParseError(
            path, f"{where}: expected a shape of up to 4 integers from 0 to 2**40, got {json.dumps(value)[:60]}"
        )
    return _jtext(value)


def _shapes(value: Any, where: str, path: Path) -> str | None:
    """``src_ne``: a list of shapes (:func:`_shape`), as compact JSON text."""
    if value is None:
        return None
    for j, v in enumerate(_list(value, where, path)):
        _shape(v, f"{where}[{j}]", path)
    return _jtext(value)


def _str(value: Any, where: str, path: Path) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ParseError(path, f"{where}: expected a string, got {json.dumps(value)[:40]}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:  # JSON escapes can spell lone surrogates ("\ud800"), which are no text
        raise ParseError(path, f"{where}: not valid Unicode text (a lone surrogate escape)") from None
    return value


def _checked_texts(value: Any, where: str, path: Path) -> str | None:
    """A list of strings (:func:`_strs` checks it), as compact JSON text (None stays None)."""
    _strs(value, where, path)
    return _jtext(value)


def _strs(value: Any, where: str, path: Path) -> list[str | None]:
    return [_str(v, f"{where}[{j}]", path) for j, v in enumerate(_list(value, where, path))]


def _list(value: Any, where: str, path: Path) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ParseError(path, f"{where}: expected a list, got {type(value).__name__}")
    return value


def _get(row: dict[str, Any], key: str) -> Any:
    for alias in _ALIASES.get(key, (key,)):
        if alias in row:
            return row[alias]
    return None


def _jtext(value: Any) -> str | None:
    return None if value is None else json.dumps(value, separators=(",", ":"))


def _node(row: dict[str, Any], where: str, path: Path) -> dict[str, Any]:
    op = row.get("ggml_op")
    if not isinstance(op, str) or not op:
        raise ParseError(path, f"{where}: 'ggml_op' must be a non-empty string")
    return {
        "ggml_op": op,
        "dtype": _str(row.get("dtype"), f"{where}.dtype", path),
        "quant": _str(row.get("quant"), f"{where}.quant", path),
        "ne": _shape(row.get("ne"), f"{where}.ne", path),
        "src_ne": _shapes(row.get("src_ne"), f"{where}.src_ne", path),
        "src_types": _checked_texts(row.get("src_types"), f"{where}.src_types", path),
        "op_params": _jtext(row.get("op_params")),
        "dst_bytes": _count(row.get("dst_bytes"), f"{where}.dst_bytes", path),
        "dst_storage_id": _u64(_get(row, "dst_storage_id"), f"{where}.dst_storage_id", path),
        "m": _count(row.get("M"), f"{where}.M", path),
        "n": _count(row.get("N"), f"{where}.N", path),
        "k": _count(row.get("K"), f"{where}.K", path),
        "n_experts": _count(row.get("n_experts"), f"{where}.n_experts", path),
        "top_k": _count(row.get("top_k"), f"{where}.top_k", path),
    }


def _operands(inv: int, node_index: int, row: dict[str, Any], where: str, path: Path) -> list[dict[str, Any]]:
    out = []
    src_ne = _list(row.get("src_ne"), f"{where}.src_ne", path)
    src_types = _strs(row.get("src_types"), f"{where}.src_types", path)
    src_bytes = _list(row.get("src_bytes"), f"{where}.src_bytes", path)
    tensor_ids = _list(_get(row, "src_tensor_ids"), f"{where}.src_tensor_ids", path)
    storage_ids = _list(_get(row, "src_storage_ids"), f"{where}.src_storage_ids", path)
    n_src = max(len(src_ne), len(src_types), len(src_bytes), len(tensor_ids), len(storage_ids))
    for j in range(n_src):
        out.append(
            {
                "invocation": inv,
                "node_index": node_index,
                "role": "src",
                "operand_index": j,
                "name": None,
                "ggml_type": src_types[j] if j < len(src_types) and src_types[j] else None,
                "ne": _jtext(src_ne[j]) if j < len(src_ne) else None,
                "bytes": _count(src_bytes[j], f"{where}.src_bytes[{j}]", path) if j < len(src_bytes) else None,
                "tensor_id": _u64(tensor_ids[j], f"{where}.src_tensor_ids[{j}]", path) if j < len(tensor_ids) else None,
                "storage_id": _u64(storage_ids[j], f"{where}.src_storage_ids[{j}]", path)
                if j < len(storage_ids)
                else None,
            }
        )
    out.append(
        {
            "invocation": inv,
            "node_index": node_index,
            "role": "dst",
            "operand_index": 0,
            "name": None,
            "ggml_type": row.get("dtype"),
            "ne": _jtext(row.get("ne")),
            "bytes": _count(row.get("dst_bytes"), f"{where}.dst_bytes", path),
            "tensor_id": None,
            "storage_id": _u64(_get(row, "dst_storage_id"), f"{where}.dst_storage_id", path),
        }
    )
    return out


def read_metadata(path: Path) -> tuple[OpMetadata, list[Note]]:
    """Read a ggml op metadata JSON file.

    Returns:
        ``(metadata, notes)``.

    Raises:
        ParseError: invalid JSON (with line), a missing ``rows`` list, a row without
            ``ggml_op``/``invocation``, or a value of the wrong type (named as ``rows[i].key``).
    """
    text = read_text(path, limit_bytes=MAX_JSON_BYTES)
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _invalid_json(path, exc) from exc
    except RecursionError as exc:  # json.loads recurses once per nesting level
        raise ParseError(path, "invalid JSON: nested too deeply (expected ggml op metadata rows)") from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("rows"), list):
        raise ParseError(path, "expected a JSON object with a 'rows' list (ggml op metadata / GGML_ROOFLINE_OUT)")
    notes: list[Note] = []
    rows = doc["rows"]
    has_inv = [isinstance(r, dict) and "invocation" in r for r in rows]
    synthetic = bool(rows) and not any(has_inv)
    if synthetic:
        notes.append(
            Note(
                "warning",
                "no-invocation-ids",
                f"{path.name}: rows carry no 'invocation' (a fork build before PR #66); rows are numbered in "
                "file order and cannot be joined to profiler markers",
            )
        )
    ops, nodes, operands, kernels = [], [], [], []
    seen: set[int] = set()
    for i, row in enumerate(rows):
        where = f"rows[{i}]"
        if not isinstance(row, dict):
            raise ParseError(path, f"{where}: expected an object")
        inv = i + 1 if synthetic else _int(row.get("invocation"), f"{where}.invocation", path)
        if inv is None:
            raise ParseError(path, f"{where}: missing 'invocation'")
        if inv < 0:
            raise ParseError(path, f"{where}.invocation: expected a non-negative integer, got {inv}")
        if inv in seen:
            notes.append(
                Note(
                    "warning", "duplicate-invocation", f"{path.name}: {where} repeats invocation {inv}; kept the first"
                )
            )
            continue
        seen.add(inv)
        head = _node(row, where, path)
        fused = _list(row.get("fused_ops"), f"{where}.fused_ops", path)
        group = [
            _node(f, f"{where}.fused_ops[{j}]", path) if isinstance(f, dict) else None for j, f in enumerate(fused)
        ]
        if any(g is None for g in group):
            raise ParseError(path, f"{where}.fused_ops: every entry must be an object")
        kern = _list(row.get("kernels"), f"{where}.kernels", path)
        gpu_ns = 0.0
        for j, k in enumerate(kern):
            if not isinstance(k, dict):
                raise ParseError(path, f"{where}.kernels[{j}]: expected an object")
            t = k.get("gpu_time_us")
            # json.loads accepts NaN and Infinity, which are no durations (they fail the range test, and so
            # does a time whose ns would not fit in 64 bits: 2**63 ns is 292 years)
            if isinstance(t, bool) or not isinstance(t, int | float) or not 0 <= t < 2**63 / 1e3:
                raise ParseError(
                    path, f"{where}.kernels[{j}].gpu_time_us: expected a non-negative number of microseconds"
                )
            gpu_ns += float(t) * 1000.0
            kernels.append(
                {
                    "invocation": inv,
                    "kernel_index": j,
                    "kernel_name": _str(k.get("name"), f"{where}.kernels[{j}].name", path) or None,
                    "gpu_time_ns": float(t) * 1000.0,
                }
            )
        tpe = row.get("tokens_per_expert")
        if tpe is not None and not (
            isinstance(tpe, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in tpe)
        ):
            raise ParseError(path, f"{where}.tokens_per_expert: expected a list of integers")
        ops.append(
            {
                "invocation": inv,
                "op": head["ggml_op"],
                "node_name": _str(row.get("name"), f"{where}.name", path),
                "op_list": "+".join(g["ggml_op"] for g in group if g) if group else head["ggml_op"],
                "is_fused": bool(group) and len(group) > 1,
                **{
                    k: head[k]
                    for k in (
                        "dtype",
                        "quant",
                        "ne",
                        "src_ne",
                        "src_types",
                        "op_params",
                        "dst_bytes",
                        "dst_storage_id",
                        "m",
                        "n",
                        "k",
                        "n_experts",
                        "top_k",
                    )
                },
                "metadata_bytes": _int(row.get("bytes"), f"{where}.bytes", path),
                "out_storage_id": _u64(row.get("out_storage_id"), f"{where}.out_storage_id", path),
                # the fork writes 0 when it did not read the routing back: unknown, not "no expert"
                "experts_used": _int(row.get("experts_used"), f"{where}.experts_used", path) or None,
                "tokens_per_expert": _jtext(tpe),
                "gpu_time_ns": gpu_ns if kern else None,
            }
        )
        node_rows = [g for g in group if g] if group else [head]
        for j, node in enumerate(node_rows):
            nodes.append({"invocation": inv, "node_index": j, **node})
            source = fused[j] if group else row
            operands += _operands(inv, j, source, f"{where}.fused_ops[{j}]" if group else where, path)
        in_ids = _list(row.get("in_storage_ids"), f"{where}.in_storage_ids", path)
        in_names = _strs(row.get("in_names"), f"{where}.in_names", path)
        in_types = _strs(row.get("in_types"), f"{where}.in_types", path)
        in_ne = _list(row.get("in_ne"), f"{where}.in_ne", path)
        for j, sid in enumerate(in_ids):
            operands.append(
                {
                    "invocation": inv,
                    "node_index": -1,
                    "role": "in",
                    "operand_index": j,
                    "name": in_names[j] if j < len(in_names) else None,
                    "ggml_type": in_types[j] if j < len(in_types) else None,
                    "ne": _jtext(in_ne[j]) if j < len(in_ne) else None,
                    "bytes": None,
                    "tensor_id": None,
                    "storage_id": _u64(sid, f"{where}.in_storage_ids[{j}]", path),
                }
            )
        if row.get("out_storage_id") is not None:
            operands.append(
                {
                    "invocation": inv,
                    "node_index": -1,
                    "role": "out",
                    "operand_index": 0,
                    "name": row.get("name"),
                    "ggml_type": None,
                    "ne": None,
                    "bytes": None,
                    "tensor_id": None,
                    "storage_id": _u64(row.get("out_storage_id"), f"{where}.out_storage_id", path),
                }
            )
    device = doc.get("device")
    meta = OpMetadata(
        ops=_frame(ops, OPS_COLUMNS),
        nodes=_frame(nodes, NODE_COLUMNS),
        operands=_frame(operands, OPERAND_COLUMNS),
        kernels=_frame(kernels, KERNEL_COLUMNS),
        device=str(device) if device else None,
        source=str(doc.get("source") or "ggml-roofline"),
    )
    return meta, notes
