"""The results database schema (SQLAlchemy Core), versions in migrations.py.

Keys: ``run.run_id`` is global; every other table is keyed by ``run_id`` plus a run-local
0-based index (``pass_index``, ``dispatch_index``, ``range_index``, ``op_index``...), so a run
is written without reading any other run's ids. Units are in column names; every column has
``info={"doc": ...}`` from which ``docs/schema.md`` is generated.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

metadata = sa.MetaData()


def _c(name: str, type_: Any, doc: str, **kw: Any) -> sa.Column[Any]:
    return sa.Column(name, type_, info={"doc": doc}, **kw)


def _str(length: int) -> sa.String:
    """``VARCHAR(length)``, the size to expect; ``TEXT`` on PostgreSQL.

    SQLite does not enforce the length and PostgreSQL would: whatever one store holds must fit the
    other (``rocroof merge`` copies runs between them), so PostgreSQL gets unbounded ``TEXT``, which it
    stores and compares exactly like ``VARCHAR``.
    """
    return sa.String(length).with_variant(sa.Text(), "postgresql")


def _run_fk() -> sa.Column[Any]:
    return sa.Column(
        "run_id",
        sa.Integer,
        sa.ForeignKey("run.run_id", ondelete="CASCADE"),
        nullable=False,
        info={"doc": "The run (see ``run``)."},
    )


run = sa.Table(
    "run",
    metadata,
    _c("run_id", sa.Integer, "Run id, assigned at ingest.", primary_key=True, autoincrement=True),
    _c("created_at", _str(32), "Ingest time, ISO 8601 UTC.", nullable=False),
    _c(
        "source_format",
        _str(64),
        "Detected input format (rocprofv3-csv, rocpd, rocprof-compute, ...).",
        nullable=False,
    ),
    _c("source_path", sa.Text, "Path the capture was ingested from."),
    _c("content_sha256", _str(64), "SHA-256 of the raw input files; refuses double ingests.", unique=True),
    _c("profiler", _str(64), "Profiler that produced the data (rocprofv3, rocprof-compute, ncu+nsys, ...)."),
    _c("profiler_version", _str(64), "Profiler version, when recorded."),
    _c("command", sa.Text, "The profiled application command line, when recorded."),
    _c("host", _str(255), "Host name, when recorded."),
    _c("gpu_arch", _str(64), "GPU architecture of the dispatches (gfx942, sm_90, ...)."),
    _c("gpu_name", _str(255), "GPU product name."),
    _c(
        "timing_source",
        _str(32),
        "Where durations come from: trace (a trace pass), counter_pass, merged_counters, "
        "profiler (the source's own per-kernel time) or none.",
    ),
    _c("serialised_timings", sa.Boolean, "True when durations come from a counter pass (kernels serialised)."),
    _c(
        "attribution_method",
        _str(32),
        "Dominant dispatch->op method: profiler, kernel_rename, nvtx_stack, launch_api, "
        "host_dispatch, enqueue_order or none (per dispatch in dispatch.attribution_method).",
    ),
    _c("dram_peak_gbps", sa.Float, "DRAM bandwidth ceiling used for this run, GB/s (1e9 B/s)."),
    _c(
        "dram_peak_source",
        sa.Text,
        "Where the ceiling comes from (measured roofline.csv, sysinfo, configs/peaks.yaml...).",
    ),
    _c(
        "dram_peak_rule",
        _str(32),
        "How the ceiling was chosen, best first: probe (rocroof's copy probe), roofline_csv (rocprofiler-compute's "
        "benchmark), capture (a bandwidth the profiler recorded), table_device / table_name / table_cu (the peaks "
        "table's row for the GPU, matched by PCI device id, product name, or architecture and CU count), "
        "table_arch (the architecture's default row).",
    ),
    _c(
        "cache_control",
        _str(32),
        "Cache flushing between kernels under the counter profiler (all, none), if known.",
    ),
    _c("rocroof_version", _str(32), "rocroof version that ingested the run."),
)

run_label = sa.Table(
    "run_label",
    metadata,
    _run_fk(),
    _c("key", _str(255), "Label key (``rocroof ingest --label key=value``).", nullable=False),
    _c("value", sa.Text, "Label value.", nullable=False),
    sa.PrimaryKeyConstraint("run_id", "key"),
)

run_note = sa.Table(
    "run_note",
    metadata,
    _run_fk(),
    _c("note_index", sa.Integer, "0-based index within the run.", nullable=False),
    _c("severity", _str(16), "info, warning or error.", nullable=False),
    _c("code", _str(64), "Stable key, e.g. missing-counter, pass-mismatch, dram-bytes-unknown.", nullable=False),
    _c("message", sa.Text, "One line for humans.", nullable=False),
    sa.PrimaryKeyConstraint("run_id", "note_index"),
)

run_setting = sa.Table(
    "run_setting",
    metadata,
    _run_fk(),
    _c("key", _str(255), "Setting or system fact (e.g. sysinfo.csv columns, rocpd metadata).", nullable=False),
    _c("value", sa.Text, "Its value as text."),
    sa.PrimaryKeyConstraint("run_id", "key"),
)

agent = sa.Table(
    "agent",
    metadata,
    _run_fk(),
    _c("agent_index", sa.Integer, "Run-local agent number (0-based; not rocprofv3's -A index).", nullable=False),
    _c("agent_label", _str(64), "The agent as traces name it ('Agent 4', '2', 'GPU 0').", nullable=False),
    _c("node_id", sa.BigInteger, "KFD node id / absolute index."),
    _c("logical_node_id", sa.BigInteger, "Logical node id (rocprofv3 'Agent N' numbering)."),
    _c("agent_type", _str(16), "GPU or CPU."),
    _c("gfx_arch", _str(64), "gfx target or sm_XY."),
    _c("product_name", _str(255), "Product name."),
    _c("cu_count", sa.Integer, "Compute units (AMD) / SMs (NVIDIA)."),
    _c("simd_count", sa.Integer, "SIMDs."),
    _c("num_xcc", sa.Integer, "Accelerator complex dies (XCDs)."),
    _c("wave_size", sa.Integer, "Wavefront / warp size, lanes."),
    _c("max_clock_mhz", sa.Float, "Maximum engine clock, MHz."),
    _c("pci_device_id", sa.Integer, "PCI device id (0x74a1 = 29857; libdrm amdgpu.ids numbering), when recorded."),
    sa.PrimaryKeyConstraint("run_id", "agent_index"),
)

pass_ = sa.Table(
    "pass",
    metadata,
    _run_fk(),
    _c("pass_index", sa.Integer, "0-based, in run order.", nullable=False),
    _c("kind", _str(16), "trace (timings), counter (counters; kernels serialised) or merged.", nullable=False),
    _c("label", sa.Text, "Pass label (sub-directory or file).", nullable=False),
    _c("source", sa.Text, "File or directory it was read from."),
    _c("is_timing_pass", sa.Boolean, "True for the pass whose dispatches carry the run's timings.", nullable=False),
    _c("dispatch_count", sa.Integer, "Dispatches in the pass.", nullable=False),
    _c("matched_count", sa.Integer, "Dispatches matched to the timing pass."),
    _c("requested_counters", sa.Text, "Counters the pass asked for, space-separated, when known."),
    _c("timestamps_exact", sa.Boolean, "False when the source rounded timestamps (durations unknown).", nullable=False),
    sa.PrimaryKeyConstraint("run_id", "pass_index"),
)

#: How a dispatch was attributed to its op (rocroof.ingest.attribution), numbered as
#: ``dispatch_record.attribution_index`` stores them: ``(method, description)``, index = position.
ATTRIBUTION_METHODS: list[tuple[str, str]] = [
    ("none", "Unattributed: no markers, or no ggml range held the launch."),
    ("launch_api", "The launching HIP/CUDA API call (by correlation id) gave the thread and host time of the launch."),
    ("nvtx_stack", "Nsight Compute's NVTX push/pop stack of the kernel at launch; the innermost ggml range."),
    ("kernel_rename", "rocprofv3 --kernel-rename recorded the innermost range as the kernel's region."),
    ("profiler", "The source attributed the dispatch itself (the AMD fork's GGML_ROOFLINE_OUT kernels)."),
    ("host_dispatch", "No launch call, but the profiler's host time of the dispatch on its thread (rocprof v1)."),
    (
        "enqueue_order",
        "No launch record: the roctx call just before the launch by the shared correlation-id counter.",
    ),
]

attribution_method = sa.Table(
    "attribution_method",
    metadata,
    _c("method_index", sa.Integer, "The number dispatch_record.attribution_index stores.", nullable=False),
    _c("method", _str(32), "Method name (rocroof.ingest.attribution).", nullable=False),
    _c("description", sa.Text, "What the method used to find the dispatch's op."),
    sa.PrimaryKeyConstraint("method_index"),
    info={"doc": "The ways a dispatch is attributed to a ggml op, numbered (the same rows in every database)."},
)

kernel_symbol = sa.Table(
    "kernel_symbol",
    metadata,
    _run_fk(),
    _c("kernel_index", sa.Integer, "Run-local kernel number, 0-based in order of first dispatch.", nullable=False),
    _c("kernel_name", sa.Text, "Kernel symbol (or the renamed region under --kernel-rename CSV).", nullable=False),
    sa.PrimaryKeyConstraint("run_id", "kernel_index"),
    info={"doc": "The distinct kernel names of a run (a few dozen), so that a dispatch stores a number, not the name."},
)

dram_text = sa.Table(
    "dram_text",
    metadata,
    _run_fk(),
    _c("text_index", sa.Integer, "Run-local number, 0-based.", nullable=False),
    _c("text", sa.Text, "A DRAM byte formula or a note on a byte count (see ``dispatch_record``).", nullable=False),
    sa.PrimaryKeyConstraint("run_id", "text_index"),
    info={"doc": "The distinct DRAM byte formulas and notes of a run, which every dispatch would repeat."},
)

#: Columns of a dispatch record that every profiler pass gives (the ``dispatch`` view shows them with
#: the kernel's name).
_DISPATCH_COLUMNS: list[tuple[str, Any, str]] = [
    ("dispatch_id", sa.BigInteger, "The profiler's dispatch id."),
    ("kernel_id", sa.BigInteger, "The profiler's kernel symbol id."),
    ("agent_index", sa.Integer, "The agent (see ``agent``)."),
    ("queue_id", sa.BigInteger, "HSA queue / CUDA context id."),
    ("stream_id", sa.BigInteger, "HIP/CUDA stream id."),
    ("process_id", sa.BigInteger, "OS process id."),
    ("thread_id", sa.BigInteger, "Launching host thread id."),
    ("correlation_id", sa.BigInteger, "Internal correlation id of the launching API call."),
    ("start_ns", sa.BigInteger, "GPU start timestamp, ns."),
    ("end_ns", sa.BigInteger, "GPU end timestamp, ns."),
    ("duration_ns", sa.BigInteger, "GPU execution time, ns; NULL when the source cannot give it."),
    ("grid_size", sa.BigInteger, "Work-items in the grid."),
    ("workgroup_size", sa.Integer, "Work-items per workgroup."),
    ("grid_x", sa.BigInteger, "Grid size X, work-items."),
    ("grid_y", sa.BigInteger, "Grid size Y, work-items."),
    ("grid_z", sa.BigInteger, "Grid size Z, work-items."),
    ("workgroup_x", sa.Integer, "Workgroup size X, work-items."),
    ("workgroup_y", sa.Integer, "Workgroup size Y, work-items."),
    ("workgroup_z", sa.Integer, "Workgroup size Z, work-items."),
    ("lds_bytes", sa.BigInteger, "LDS / shared memory per workgroup, bytes."),
    ("scratch_bytes", sa.BigInteger, "Scratch per work-item, bytes."),
    ("vgpr_count", sa.Integer, "Architected VGPRs per work-item."),
    ("accum_vgpr_count", sa.Integer, "Accumulation VGPRs per work-item."),
    ("sgpr_count", sa.Integer, "SGPRs per wave."),
    ("launch_ns", sa.BigInteger, "Host time of the launching API call, ns (attribution)."),
    ("range_index", sa.Integer, "Innermost marker range open at launch (see ``marker_range``)."),
    ("op_index", sa.Integer, "The ggml op invocation (see ``op_invocation``); NULL = unattributed."),
    ("kernel_ordinal", sa.Integer, "0-based position of the kernel inside its op invocation."),
    (
        "attribution_method",
        _str(32),
        "profiler, kernel_rename, nvtx_stack, launch_api, host_dispatch, enqueue_order or none.",
    ),
    (
        "timing_dispatch_index",
        sa.Integer,
        "The matching dispatch of the timing pass (itself for the timing pass); NULL when unmatched.",
    ),
]
#: :data:`_DISPATCH_COLUMNS` as ``dispatch_record`` stores them: the attribution method by number.
_RECORD_COLUMNS: list[tuple[str, Any, str]] = [
    ("attribution_index", sa.Integer, "How it was attributed (see ``attribution_method``).")
    if name == "attribution_method"
    else (name, type_, doc)
    for name, type_, doc in _DISPATCH_COLUMNS
]
#: The DRAM byte columns a timing-pass dispatch record carries (rocroof.analysis.dram).
_DRAM_COLUMNS: list[tuple[str, Any, str]] = [
    ("dram_read_bytes", sa.Float, "DRAM bytes read (counters of all passes joined); NULL when undetermined."),
    ("dram_read_bytes_min", sa.Float, "Lower bound of the read bytes; NULL when exact (= dram_read_bytes)."),
    ("dram_read_bytes_max", sa.Float, "Upper bound of the read bytes; NULL when exact."),
    ("dram_write_bytes", sa.Float, "DRAM bytes written; NULL when undetermined."),
    ("dram_write_bytes_min", sa.Float, "Lower bound of the written bytes; NULL when exact."),
    ("dram_write_bytes_max", sa.Float, "Upper bound of the written bytes; NULL when exact."),
    ("dram_formula_index", sa.Integer, "The byte formula used (see ``dram_text``); NULL when no counters."),
    ("dram_note_index", sa.Integer, "Why a byte count is unknown or approximate (see ``dram_text``)."),
]

dispatch_record = sa.Table(
    "dispatch_record",
    metadata,
    _run_fk(),
    _c("dispatch_index", sa.Integer, "Run-local row number (0-based, pass by pass).", nullable=False),
    _c("pass_index", sa.Integer, "The pass the record comes from.", nullable=False),
    _c("ordinal", sa.Integer, "0-based enqueue order within the pass.", nullable=False),
    _c("kernel_index", sa.Integer, "The kernel (see ``kernel_symbol``)."),
    *(_c(name, type_, doc) for name, type_, doc in _RECORD_COLUMNS),
    *(_c(name, type_, doc) for name, type_, doc in _DRAM_COLUMNS),
    sa.PrimaryKeyConstraint("run_id", "dispatch_index"),
    # links a browser follows (Datasette): to the op invocation and the kernel's name; deferred, so that a
    # run's rows may go in any order inside its one transaction (checked at commit)
    sa.ForeignKeyConstraint(
        ["run_id", "op_index"],
        ["op_invocation.run_id", "op_invocation.op_index"],
        name="fk_dispatch_record_op",
        deferrable=True,
        initially="DEFERRED",
    ),
    sa.ForeignKeyConstraint(
        ["run_id", "kernel_index"],
        ["kernel_symbol.run_id", "kernel_symbol.kernel_index"],
        name="fk_dispatch_record_kernel",
        deferrable=True,
        initially="DEFERRED",
    ),
    sqlite_with_rowid=False,  # the primary key is the table (no second B-tree: 0007_clustered_tables)
    info={
        "doc": "One row per kernel dispatch of every pass, with the DRAM bytes of the timing pass's dispatches "
        "(the ``dispatch`` view adds the kernel's name, ``dram_traffic`` the formulas)."
    },
)

counter = sa.Table(
    "counter",
    metadata,
    _run_fk(),
    _c("counter_index", sa.Integer, "Run-local counter number, 0-based.", nullable=False),
    _c("counter_name", _str(255), "Counter name as collected (e.g. TCC_EA0_RDREQ_sum).", nullable=False),
    sa.PrimaryKeyConstraint("run_id", "counter_index"),
    info={"doc": "The counters a run collected, numbered (``counter_value`` shows the readings by name)."},
)

#: Counters stored side by side on one ``counter_reading`` row: counter ``i`` of a run is in block
#: ``i // 16``, column ``value_{i % 16}``.
COUNTERS_PER_READING = 16

counter_reading = sa.Table(
    "counter_reading",
    metadata,
    _run_fk(),
    _c("dispatch_index", sa.Integer, "The dispatch record (of the pass that measured it).", nullable=False),
    _c(
        "block",
        sa.Integer,
        "Which 16 counters the row holds: counter_index 16*block .. 16*block+15 (see ``counter``).",
        nullable=False,
    ),
    *(
        _c(
            f"value_{slot}",
            sa.Float,
            f"Counter 16*block+{slot} of this dispatch, summed over hardware instances (counts; KB for "
            "FETCH_SIZE/WRITE_SIZE); NULL when the dispatch has no such reading.",
        )
        for slot in range(COUNTERS_PER_READING)
    ),
    sa.PrimaryKeyConstraint("run_id", "dispatch_index", "block"),
    sqlite_with_rowid=False,  # the primary key is the table: one B-tree, not a table and an index
    info={
        "doc": "A dispatch's counter values, 16 to a row (read them one per row through the ``counter_value`` view): "
        "8 counters of 10^6 dispatches are 10^6 rows of 11 values instead of 8x10^6 rows of 4."
    },
)

counter_instance_reading = sa.Table(
    "counter_instance_reading",
    metadata,
    _run_fk(),
    _c("dispatch_index", sa.Integer, "The dispatch record.", nullable=False),
    _c("counter_index", sa.Integer, "The counter (see ``counter``), without the [i] suffix.", nullable=False),
    _c("instance", sa.Integer, "0-based hardware instance (e.g. TCC channel).", nullable=False),
    _c("value", sa.Float, "Value of this instance.", nullable=False),
    sa.PrimaryKeyConstraint("run_id", "dispatch_index", "counter_index", "instance"),
    sqlite_with_rowid=False,
    info={"doc": "Per-instance counter values (read them through the ``counter_instance`` view)."},
)

marker_range = sa.Table(
    "marker_range",
    metadata,
    _run_fk(),
    _c("range_index", sa.Integer, "Run-local index.", nullable=False),
    _c("pass_index", sa.Integer, "The pass it was recorded in.", nullable=False),
    _c("kind", _str(8), "range (push/pop or start/stop) or mark (instant).", nullable=False),
    _c("process_id", sa.BigInteger, "OS process id."),
    _c("thread_id", sa.BigInteger, "OS thread id."),
    _c("start_ns", sa.BigInteger, "Host start time, ns."),
    _c("end_ns", sa.BigInteger, "Host end time, ns (= start_ns for marks)."),
    _c("message", sa.Text, "roctx/NVTX message."),
    _c("depth", sa.Integer, "Nesting depth on its thread (0 = outermost)."),
    _c("correlation_id", sa.BigInteger, "Internal correlation id of the roctx call, when recorded."),
    _c("invocation", sa.BigInteger, "ggml invocation id when the message is a ggml range."),
    sa.PrimaryKeyConstraint("run_id", "range_index"),
    sqlite_with_rowid=False,
)

op_invocation = sa.Table(
    "op_invocation",
    metadata,
    _run_fk(),
    _c("op_index", sa.Integer, "Run-local index, in invocation order.", nullable=False),
    _c("invocation", sa.BigInteger, "The ggml invocation id as emitted (monotonic per process).", nullable=False),
    _c("op", _str(64), "ggml op of the range / head node (ggml_op_desc: MUL_MAT, SILU, ...).", nullable=False),
    _c(
        "op_list",
        sa.Text,
        "All ops of a fused group joined by '+' (RMS_NORM+MUL); = op when not fused.",
        nullable=False,
    ),
    _c("is_fused", sa.Boolean, "True for a fused node group.", nullable=False),
    _c("node_name", sa.Text, "Head node name (e.g. Qcur-0)."),
    _c("node_names", sa.Text, "Node names of a fused group joined by '|'."),
    _c("layer", sa.Integer, "Layer number parsed from a '-<n>' node-name suffix."),
    _c("from_marker", sa.Boolean, "Seen as a profiler marker range.", nullable=False),
    _c("from_metadata", sa.Boolean, "Present in the ggml op metadata JSON.", nullable=False),
    _c("dtype", _str(32), "Output tensor type (f32, ...)."),
    _c("quant", _str(32), "src0 type (the weight quantisation for matmuls)."),
    _c("ne", sa.Text, "Output shape [ne0, ne1, ne2, ne3] (JSON)."),
    _c("src_ne", sa.Text, "Source shapes (JSON)."),
    _c("src_types", sa.Text, "Source types (JSON)."),
    _c("op_params", sa.Text, "Raw op_params as 16 int32 (JSON)."),
    _c("metadata_bytes", sa.BigInteger, "The fork's 'bytes' (head node, no dedup), bytes."),
    _c("dst_bytes", sa.BigInteger, "Output tensor size, bytes."),
    _c("dst_storage_id", sa.BigInteger, "Storage id of the output (view_src root)."),
    _c("out_storage_id", sa.BigInteger, "Storage id written by the group (last node)."),
    _c("m", sa.BigInteger, "MUL_MAT(_ID) M (tokens)."),
    _c("n", sa.BigInteger, "MUL_MAT(_ID) N (output rows)."),
    _c("k", sa.BigInteger, "MUL_MAT(_ID) K (reduction)."),
    _c("n_experts", sa.Integer, "MUL_MAT_ID experts in the weight tensor."),
    _c("top_k", sa.Integer, "MUL_MAT_ID experts used per token."),
    _c("experts_used", sa.Integer, "Distinct experts routed by this launch (NULL = not read back)."),
    _c("tokens_per_expert", sa.Text, "Per-expert routed token counts (JSON)."),
    _c("metadata_gpu_time_ns", sa.Float, "GPU time reported by the fork's JSON, ns."),
    sa.PrimaryKeyConstraint("run_id", "op_index"),
    sa.UniqueConstraint("run_id", "invocation", name="uq_op_invocation_run_invocation"),  # one row per launch
    sqlite_with_rowid=False,
)

op_node = sa.Table(
    "op_node",
    metadata,
    _run_fk(),
    _c("op_index", sa.Integer, "The op invocation.", nullable=False),
    _c("node_index", sa.Integer, "0 = head node; fused groups list every node.", nullable=False),
    _c("ggml_op", _str(64), "ggml op of the node.", nullable=False),
    _c("dtype", _str(32), "Output type."),
    _c("quant", _str(32), "src0 type."),
    _c("ne", sa.Text, "Output shape (JSON)."),
    _c("src_ne", sa.Text, "Source shapes (JSON)."),
    _c("src_types", sa.Text, "Source types (JSON)."),
    _c("op_params", sa.Text, "op_params (JSON)."),
    _c("dst_bytes", sa.BigInteger, "Output size, bytes."),
    _c("dst_storage_id", sa.BigInteger, "Output storage id."),
    _c("m", sa.BigInteger, "M."),
    _c("n", sa.BigInteger, "N."),
    _c("k", sa.BigInteger, "K."),
    _c("n_experts", sa.Integer, "Experts."),
    _c("top_k", sa.Integer, "top-k."),
    sa.PrimaryKeyConstraint("run_id", "op_index", "node_index"),
    sqlite_with_rowid=False,
)

op_operand = sa.Table(
    "op_operand",
    metadata,
    _run_fk(),
    _c("op_index", sa.Integer, "The op invocation.", nullable=False),
    _c("node_index", sa.Integer, "The node (-1 for the group's graph inputs/outputs).", nullable=False),
    _c("role", _str(8), "src, dst (per node), in, out (graph edges of the group).", nullable=False),
    _c("operand_index", sa.Integer, "Position among operands of that role.", nullable=False),
    _c("name", sa.Text, "Tensor name (storage root name for inputs)."),
    _c("ggml_type", _str(32), "ggml type name."),
    _c("ne", sa.Text, "Shape (JSON)."),
    _c("bytes", sa.BigInteger, "ggml_nbytes, bytes."),
    _c("tensor_id", sa.BigInteger, "Tensor id (address; dedup key)."),
    _c("storage_id", sa.BigInteger, "Storage id (view_src root address)."),
    sa.PrimaryKeyConstraint("run_id", "op_index", "node_index", "role", "operand_index"),
    sqlite_with_rowid=False,
)

op_model = sa.Table(
    "op_model",
    metadata,
    _run_fk(),
    _c("op_index", sa.Integer, "The op invocation (see ``op_invocation``).", nullable=False),
    _c(
        "model_read_bytes",
        sa.BigInteger,
        "Modelled DRAM bytes read: each input tensor once, views and fused-group internals excluded, "
        "MUL_MAT_ID experts scaled by experts_used/n_experts (rocroof.analysis.model); NULL if a size is unknown.",
    ),
    _c("model_write_bytes", sa.BigInteger, "Modelled DRAM bytes written (KV-cache rows once; in-place once)."),
    _c(
        "flops",
        sa.Float,
        "Modelled floating-point operations (multiply-add = 2; rocroof.analysis.model); NULL if no model.",
    ),
    _c("model_note", sa.Text, "What the model assumed or could not know (empty when nothing)."),
    _c(
        "evaluation",
        sa.Integer,
        "Graph evaluation (one llama_decode) the op belongs to, 0-based (rocroof.analysis.graph).",
    ),
    _c("block_part", _str(16), "Part of the transformer block: attention, ffn, moe, input, output."),
    _c("on_critical_path", sa.Boolean, "On the longest dependency chain (by time) of its graph evaluation."),
    _c(
        "compute_ceiling",
        _str(32),
        "run_ceiling name of the compute peak that governs the op: int8_matrix_tops (ggml's int8 MMQ/MMVQ "
        "kernels for quantized weights), bf16_matrix_tflops, fp16_matrix_tflops (other matrix ops), "
        "fp32_vector_tflops (F32 weights, non-matrix ops); rocroof.analysis.roofline.compute_type.",
    ),
    sa.PrimaryKeyConstraint("run_id", "op_index"),
    sqlite_with_rowid=False,
)

op_edge = sa.Table(
    "op_edge",
    metadata,
    _run_fk(),
    _c("edge_index", sa.Integer, "Run-local index.", nullable=False),
    _c("src_op_index", sa.Integer, "Producer op invocation (last writer of the storage).", nullable=False),
    _c("dst_op_index", sa.Integer, "Consumer op invocation.", nullable=False),
    _c("storage_id", sa.BigInteger, "Storage id carried by the edge."),
    _c("tensor_name", sa.Text, "Tensor name as the consumer sees it, when known."),
    sa.PrimaryKeyConstraint("run_id", "edge_index"),
    sqlite_with_rowid=False,
)

run_ceiling = sa.Table(
    "run_ceiling",
    metadata,
    _run_fk(),
    _c(
        "name",
        _str(32),
        "dram_gbps, fp16_matrix_tflops, bf16_matrix_tflops, fp32_vector_tflops, int8_matrix_tops, llc_bytes, "
        "compute_units, l2_gbps (L2 bandwidth: measured only, by rocprofiler-compute's roofline.csv).",
        nullable=False,
    ),
    _c(
        "value",
        sa.Float,
        "The ceiling, in the unit its name gives (GB/s = 1e9 B/s, TFLOP/s = 1e12 FLOP/s, TOP/s = 1e12 integer op/s).",
    ),
    _c("source", sa.Text, "Where the value comes from (datasheet page, roofline.csv measurement...)."),
    _c("mark", _str(16), "verified, derived, unverified or measured."),
    sa.PrimaryKeyConstraint("run_id", "name"),
)

op_total = sa.Table(
    "op_total",
    metadata,
    _run_fk(),
    _c("row_index", sa.Integer, "0-based row of the run's op_summary.", nullable=False),
    _c("op", _str(64), "ggml op (head op of fused groups); NULL for dispatches outside any ggml range."),
    _c("invocations", sa.BigInteger, "Distinct op invocations."),
    _c("dispatches", sa.BigInteger, "Kernel dispatches."),
    _c("duration_ns", sa.BigInteger, "Sum of GPU time, ns (NULL if any dispatch's is unknown)."),
    _c("dram_read_bytes", sa.Float, "Sum of DRAM bytes read (NULL if any is unknown)."),
    _c("dram_read_bytes_min", sa.Float, "Sum of the lower bounds of bytes read."),
    _c("dram_read_bytes_max", sa.Float, "Sum of the upper bounds of bytes read."),
    _c("dram_write_bytes", sa.Float, "Sum of DRAM bytes written (NULL if any is unknown)."),
    _c("dram_write_bytes_min", sa.Float, "Sum of the lower bounds of bytes written."),
    _c("dram_write_bytes_max", sa.Float, "Sum of the upper bounds of bytes written."),
    _c("dram_bytes", sa.Float, "Sum of read + write bytes."),
    _c("achieved_gbps", sa.Float, "dram_bytes / duration_ns, GB/s."),
    _c("achieved_gbps_min", sa.Float, "Lower bound of the bandwidth, GB/s."),
    _c("achieved_gbps_max", sa.Float, "Upper bound of the bandwidth, GB/s."),
    _c("pct_of_dram_peak", sa.Float, "achieved_gbps as % of the run's DRAM ceiling."),
    _c("dram_time_at_peak_ns", sa.Float, "Sum of the dispatches' time at the DRAM ceiling, ns."),
    sa.PrimaryKeyConstraint("run_id", "row_index"),
    info={
        "doc": "The op_summary view's rows of a run, stored with it in its ingest transaction (what "
        "rocroof report --by op reads: summing 10^6 dispatches per report takes seconds)."
    },
)

stored_report = sa.Table(
    "stored_report",
    metadata,
    _run_fk(),
    _c("grouping", _str(16), "The report's rows: op (rocroof report --by op).", nullable=False),
    _c(
        "rocroof_version",
        _str(32),
        "The rocroof that built it; another version builds the report from the tables again.",
        nullable=False,
    ),
    _c(
        "document",
        sa.Text,
        "JSON: columns, rows (one list per row, null for unknown), total_rows, totals and fused groups "
        "(op, op_list, invocations), as rocroof.report.tables.build_report returns them.",
        nullable=False,
    ),
    sa.PrimaryKeyConstraint("run_id", "grouping"),
    info={
        "doc": "A run's report rows, built by rocroof.report.tables.build_report in the run's ingest transaction "
        "and read back by rocroof report (table and Markdown) without recomputing the roofline of every "
        "invocation: a cache of the tables above, never a source of data. A run ingested before schema 9 has "
        "none and is reported from its tables."
    },
)

#: The op_summary columns that op_total stores, in the view's order.
OP_TOTAL_COLUMNS = [c.name for c in op_total.columns if c.name not in ("row_index",)]

INDEXES = [
    # dispatches by op: the timing records only (what the summaries read; half the entries with Nsight's two passes)
    sa.Index(
        "ix_dispatch_op",
        dispatch_record.c.run_id,
        dispatch_record.c.op_index,
        sqlite_where=dispatch_record.c.timing_dispatch_index == dispatch_record.c.dispatch_index,
        postgresql_where=dispatch_record.c.timing_dispatch_index == dispatch_record.c.dispatch_index,
    ),
    # the fused groups a report counts (a few percent of the invocations): a partial index answers it
    sa.Index(
        "ix_op_fused",
        op_invocation.c.run_id,
        op_invocation.c.op,
        op_invocation.c.op_list,
        sqlite_where=op_invocation.c.is_fused.is_(True),
        postgresql_where=op_invocation.c.is_fused.is_(True),
    ),
]
