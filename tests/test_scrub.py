"""rocroof scrub, and what ingest does with damaged or partial Nsight captures.

Secrets are planted by the test in a copy of a committed example capture (examples/h200), so
what must disappear is known independently of rocroof.
"""

from __future__ import annotations

import gzip
import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from rocroof.capture.readers import read_capture
from rocroof.capture.scrub import scrub_capture, shorten_paths
from rocroof.cli import cli
from rocroof.errors import InputError
from rocroof.ingest.pipeline import build_run
from rocroof.store import Store

from .conftest import add_nsys_identity_tables, writable_copy

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "h200" / "dense-prefill"
SECRETS = ("s3cr3t-token-value", "gpu-node-4711.example.org", "alice-the-user", "/home/alice-the-user/models")


def _all_bytes(root: Path) -> bytes:
    out = b""
    for f in sorted(root.rglob("*")):
        if f.is_file():
            data = f.read_bytes()
            out += gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data
    return out


@pytest.fixture
def dirty(tmp_path: Path) -> Path:
    """The example capture with an environment, a host, a user and paths planted in it."""
    cap = tmp_path / "dirty"
    writable_copy(EXAMPLE, cap)
    db = cap / "trace" / "nsys.sqlite"
    db.write_bytes(gzip.decompress((cap / "trace" / "nsys.sqlite.gz").read_bytes()))
    (cap / "trace" / "nsys.sqlite.gz").unlink()
    with sqlite3.connect(db) as con:
        add_nsys_identity_tables(con)
        con.executemany(
            "INSERT INTO META_DATA_CAPTURE (name, value) VALUES (?, ?)",
            [
                ("PROCESS_0:ENVIRONMENT_VARIABLE", f'API_TOKEN="{SECRETS[0]}"'),
                ("PROCESS_0:ENVIRONMENT_VARIABLE", 'GGML_CUDA_MARKERS="1"'),
                ("PROCESS_0:USER_NAME", SECRETS[2]),
                ("PROCESS_0:WORKING_DIR", SECRETS[3]),
            ],
        )
        con.execute(
            "INSERT INTO TARGET_INFO_SYSTEM_ENV (globalVid, devStateName, name, nameEnum, value) "
            "VALUES (1, 'x', 'Hostname', 619, ?)",
            (SECRETS[1],),
        )
        con.execute("INSERT INTO StringIds (id, value) VALUES (999999, ?)", (f"A=1\x00API_TOKEN={SECRETS[0]}\x00B=2",))
    manifest = json.loads((cap / "rocroof-collect.json").read_text())
    manifest["host"] = SECRETS[1]
    manifest["passes"][0]["env"]["API_TOKEN"] = SECRETS[0]
    manifest["command"][2] = SECRETS[3] + "/dense-tiny.gguf"
    (cap / "rocroof-collect.json").write_text(json.dumps(manifest, indent=2))
    (cap / "trace" / "nsys.log").write_text(f"loading {SECRETS[3]}/dense-tiny.gguf on {SECRETS[1]}\n")
    (cap / "ncu" / "ncu.ncu-rep").write_bytes(b"binary report " + SECRETS[0].encode())
    return cap


def _numbers(cap: Path, tmp: Path) -> list[tuple[object, ...]]:
    db = tmp / f"{cap.name}.db"
    Store(db).write_run(build_run(read_capture(cap)))
    return [
        tuple(r)
        for r in Store(db, read_only=True)
        .query(
            "SELECT dispatch_index, op, invocation, kernel_name, duration_ns, dram_read_bytes, dram_write_bytes "
            "FROM dispatch_dram ORDER BY dispatch_index"
        )
        .itertuples(index=False)
    ]


def test_scrub_removes_what_was_planted_and_keeps_the_numbers(dirty: Path, tmp_path: Path) -> None:
    assert all(s.encode() in _all_bytes(dirty) for s in SECRETS)
    out = tmp_path / "clean"
    report = scrub_capture(dirty, out, compress=True)
    data = _all_bytes(out)
    for secret in SECRETS:
        assert secret.encode() not in data, secret
    manifest = json.loads((out / "rocroof-collect.json").read_text())
    env = manifest["passes"][0]["env"]
    assert env and all(k.startswith("GGML_") for k in env)  # the variables that shaped the run stay
    assert "ncu/ncu.ncu-rep" in report.dropped and not (out / "ncu" / "ncu.ncu-rep").exists()
    assert (out / "trace" / "nsys.sqlite.gz").is_file() and (out / "rocroof-collect.json").is_file()
    assert report.removed["environment variable"] >= 1  # the manifest's API_TOKEN
    # META_DATA_CAPTURE and TARGET_INFO_SYSTEM_ENV go whole; the NUL-separated block is a string no kept table names
    assert report.removed["table"] >= 2 and report.removed["string not named by a kept table"] >= 1
    assert _numbers(out, tmp_path) == _numbers(dirty, tmp_path)


def test_scrub_refuses_bad_destinations_and_leaves_nothing_on_failure(dirty: Path, tmp_path: Path) -> None:
    with pytest.raises(InputError, match="inside the capture"):
        scrub_capture(dirty, dirty / "x")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "f").write_text("x")
    with pytest.raises(InputError, match="not an empty directory"):
        scrub_capture(dirty, tmp_path / "full")
    with pytest.raises(InputError, match="a manifest file, one part of a capture; scrub takes a capture directory"):
        scrub_capture(dirty / "rocroof-collect.json", tmp_path / "o")
    (dirty / "trace" / "nsys.sqlite").write_bytes(b"not a database at all" * 100)
    with pytest.raises(InputError, match="nsys.sqlite: not a readable SQLite database"):
        scrub_capture(dirty, tmp_path / "half")
    assert not (tmp_path / "half").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".half")] == []
    (tmp_path / "file.txt").write_text("x")
    result = CliRunner().invoke(cli, ["scrub", str(EXAMPLE), "--out", str(tmp_path / "file.txt" / "x")])
    assert result.exit_code == 1 and result.output.startswith("Error: ") and "Traceback" not in result.output


def test_scrub_refuses_a_folder_without_profiler_output(tmp_path: Path) -> None:
    # an empty folder, or one of notes and a log, is no capture: refused as ingest refuses it, and no
    # destination is written (it was: "Wrote 0 file(s)", exit status 0)
    (tmp_path / "empty").mkdir()
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "README.md").write_text("how I ran it\n")
    (notes / "run.log").write_text("llama-cli -m model.gguf\n")
    (notes / "table.csv").write_text("a,b\n1,2\n")
    for src, why in (
        (tmp_path / "empty", "the directory is empty"),
        (notes, "none of its 3 file(s) is one rocroof reads"),
    ):
        result = CliRunner().invoke(cli, ["scrub", str(src), "--out", str(tmp_path / f"{src.name}-out")])
        assert result.exit_code == 1 and "Traceback" not in result.output
        assert result.output.startswith(f"Error: {src}: no profiler output to scrub ({why}); expected a capture")
        assert not (tmp_path / f"{src.name}-out").exists()
        assert [p.name for p in tmp_path.iterdir() if p.name.startswith(f".{src.name}-out")] == []


def test_shorten_paths() -> None:
    assert shorten_paths("/tmp/rr/build/bin/llama-bench -m /data/m.gguf") == "llama-bench -m m.gguf"
    assert shorten_paths('GGML_CUDA_OP_META="/a/b/meta.json"') == 'GGML_CUDA_OP_META="meta.json"'
    assert shorten_paths("ggml:MUL_MAT:ffn_up-3:17 a/b") == "ggml:MUL_MAT:ffn_up-3:17 a/b"  # relative: kept


@pytest.mark.parametrize(
    ("target", "content", "message"),
    [
        ("trace/nsys.sqlite.gz", b"", "not an Nsight Systems export"),
        (
            "trace/nsys.sqlite.gz",
            gzip.compress(b"SQLite format 3\x00" + b"\x00" * 100, mtime=0),
            "not an Nsight Systems export",
        ),
        ("ncu/ncu_raw.csv.gz", gzip.compress(b'"a","b"\n"1","2"\n', mtime=0), "not an Nsight Compute raw export"),
        ("ncu/ncu_raw.csv.gz", b"plain text, not gzip", "not an Nsight Compute raw export"),
    ],
)
def test_a_damaged_export_stops_the_ingest(tmp_path: Path, target: str, content: bytes, message: str) -> None:
    cap = tmp_path / "cap"
    shutil.copytree(EXAMPLE, cap)
    (cap / target).chmod(0o644)
    (cap / target).write_bytes(content)
    with pytest.raises(Exception, match=message):
        read_capture(cap)


def test_a_pass_the_manifest_lists_must_be_there(tmp_path: Path) -> None:
    cap = tmp_path / "cap"
    shutil.copytree(EXAMPLE, cap)
    (cap / "trace" / "nsys.sqlite.gz").chmod(0o644)
    (cap / "trace" / "nsys.sqlite.gz").unlink()
    with pytest.raises(InputError, match=r"trace: the capture's manifest lists this pass but it holds no nsys.sqlite"):
        read_capture(cap)


def test_ncu_alone_drops_the_warmup_by_the_sidecar(tmp_path: Path) -> None:
    """Without the nsys trace, the sidecar's first invocation marks the end of llama-bench's warm-up."""
    csv_path = EXAMPLE / "ncu" / "ncu_raw.csv.gz"
    meta = json.loads(gzip.decompress((EXAMPLE / "trace" / "ggml-op-meta.json.gz").read_bytes()))
    first = min(r["invocation"] for r in meta["rows"])
    with_sidecar = build_run(read_capture(csv_path, attachments=[EXAMPLE / "trace" / "ggml-op-meta.json.gz"]))
    alone = build_run(read_capture(csv_path))
    d_side, d_alone = with_sidecar.tables["dispatch"], alone.tables["dispatch"]
    assert len(d_alone) == 2 * len(d_side)  # llama-bench ran the same graph twice: warm-up, then -r 1
    assert with_sidecar.tables["op_invocation"]["invocation"].min() == first
    assert alone.tables["op_invocation"]["invocation"].min() < first


def test_ingest_of_a_folder_skips_stored_captures_and_goes_on_after_a_bad_one(tmp_path: Path) -> None:
    folder = tmp_path / "caps"
    for name in ("a", "b", "c"):
        shutil.copytree(EXAMPLE, folder / name)
    bad = folder / "b" / "ncu" / "ncu_raw.csv.gz"
    bad.chmod(0o644)
    bad.write_bytes(b"")
    db = str(tmp_path / "r.db")
    result = CliRunner().invoke(cli, ["ingest", str(folder), "--db", db])
    assert result.exit_code == 1
    assert "1 of 3 capture(s) not stored" in result.output and "Traceback" not in result.output
    # a and c hold the same content: c is skipped as already stored, not an error
    assert result.output.count("Stored run") == 1 and "Skipped" in result.output
    shutil.rmtree(folder / "b")
    again = CliRunner().invoke(cli, ["ingest", str(folder), "--db", db])
    assert again.exit_code == 0 and again.output.count("Skipped") == 2


def test_a_short_host_name_is_kept_in_free_text_and_the_cli_says_so(dirty: Path, tmp_path: Path) -> None:
    """A 2-letter host name would hit ordinary words in logs: replaced in host fields only, and named."""
    manifest = json.loads((dirty / "rocroof-collect.json").read_text())
    manifest["host"] = "vm"
    (dirty / "rocroof-collect.json").write_text(json.dumps(manifest, indent=2))
    (dirty / "trace" / "nsys.log").write_text("vm: loading the model into vmem\n")
    result = CliRunner().invoke(cli, ["scrub", str(dirty), "--out", str(tmp_path / "clean")])
    assert result.exit_code == 0, result.output
    assert "warning: vm replaced in host fields only" in result.output
    assert json.loads((tmp_path / "clean" / "rocroof-collect.json").read_text())["host"] == "host"
    assert (tmp_path / "clean" / "trace" / "nsys.log").read_text() == "vm: loading the model into vmem\n"


def test_names_in_gzipped_exports_are_learned_and_damaged_files_are_named(tmp_path: Path) -> None:
    """A host name only a gzipped nsys export records is still replaced in the capture's logs."""
    host = "gpu-node-4711.example.org"
    cap = tmp_path / "cap"
    writable_copy(EXAMPLE, cap)
    gz = cap / "trace" / "nsys.sqlite.gz"
    plain = tmp_path / "nsys.sqlite"
    plain.write_bytes(gzip.decompress(gz.read_bytes()))
    with sqlite3.connect(plain) as con:
        add_nsys_identity_tables(con)
        con.execute(
            "INSERT INTO TARGET_INFO_SYSTEM_ENV (globalVid, devStateName, name, nameEnum, value) "
            "VALUES (1, 'x', 'Hostname', 619, ?)",
            (host,),
        )
    con.close()
    gz.write_bytes(gzip.compress(plain.read_bytes()))
    (cap / "trace" / "nsys.log").write_text(f"profiling on {host}\n")
    scrub_capture(cap, tmp_path / "clean")
    assert host.encode() not in _all_bytes(tmp_path / "clean")
    cut = cap / "ncu" / "ncu_raw.csv.gz"
    cut.write_bytes(cut.read_bytes()[:2000])
    with pytest.raises(InputError, match=r"ncu_raw\.csv\.gz: compressed data is damaged or truncated"):
        scrub_capture(cap, tmp_path / "again", compress=True)
    assert not (tmp_path / "again").exists()
