"""rocroof scrub: secrets that sit inside a path, and files that are not the text their name says.

A user's trial found ``path /home/alice/proj/token=ghp_FFFFSECRET6`` scrubbed to
``path token=ghp_FFFFSECRET6``: the path was shortened after the redaction, so its last part was
never redacted. And a folder of ``notes.txt`` and binary data named ``kernel_trace.csv`` was copied
as it was ("0 rewritten"). The secrets are planted here, so what must disappear is known
independently of rocroof.
"""

from __future__ import annotations

import gzip
import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from rocroof.capture.scrub import REDACTED, Redactor, ScrubReport, scrub_capture
from rocroof.cli import cli
from rocroof.errors import InputError

from . import synthetic
from .test_scrub_secrets import dump

#: (kind, the text, the part of it that must not survive a scrub)
SECRET_KINDS = [
    ("token=value", "token=ghp_FFFFSECRET6", "FFFFSECRET6"),
    ("environment variable", "HF_TOKEN=hfvalue-Secret-31", "hfvalue-Secret-31"),
    ("password=value", "password=pw-Secret-77", "pw-Secret-77"),
    ("api_key=value", "my_api_key=ak-Secret-19", "ak-Secret-19"),
    ("password: value", "password:pw-Field-88", "pw-Field-88"),
    ("secret flag", "--hf-token=hf-Flag-Secret-5", "hf-Flag-Secret-5"),
    ("password in a URL", "https://bob:pw-in-url-99@proxy.example", "pw-in-url-99"),
    ("GitHub token", "ghp_" + "A1b2C3d4" * 5, "A1b2C3d4" * 5),
    ("AWS key id", "AKIAQWERTYUIOPASDFGH", "AKIAQWERTYUIOPASDFGH"),
    ("Hugging Face token", "hf_" + "Zq9Secret" * 3, "Zq9Secret" * 3),
]

#: How the secret sits in a line of text.
EMBEDDINGS = [
    ("alone", "{}"),
    ("last part of an absolute path", "/home/alice/proj/{}"),
    ("last part of a deep absolute path", "/a/b/c/d/e/{}"),
    ("inside an absolute path", "/data/{}/model.gguf"),
    ("last part of a relative path", "proj/{}"),
    ("quoted absolute path", '"/home/alice/proj/{}"'),
]


@pytest.mark.parametrize(("kind", "text", "secret"), SECRET_KINDS, ids=[k[0] for k in SECRET_KINDS])
@pytest.mark.parametrize(("where", "template"), EMBEDDINGS, ids=[e[0] for e in EMBEDDINGS])
def test_a_secret_inside_a_path_is_redacted(kind: str, text: str, secret: str, where: str, template: str) -> None:
    line = "path " + template.format(text) + " done"
    out = Redactor(ScrubReport(), users=["alice"])(line)
    assert secret not in out, f"{kind} {where}: {out!r}"
    assert out.startswith("path ") and out.endswith(" done")  # the words around it stay
    assert "/home" not in out and "alice" not in out


def test_the_users_trial_line() -> None:
    # written out by hand: the path goes, the name stays, the value is redacted
    out = Redactor(ScrubReport())("path /home/alice/proj/token=ghp_FFFFSECRET6")
    assert out == f"path token={REDACTED}"


# ---- every file type scrub rewrites -------------------------------------------------------------------

#: Each secret kind at the end of a home path, one per line (the user's trial line first).
PLANTED = [f"/home/alice/proj/{text}" for _, text, _ in SECRET_KINDS]
MUST_GO = [secret for _, _, secret in SECRET_KINDS]


def _scrubbed_without_secrets(cap: Path, out: Path) -> str:
    """The text of ``cap`` scrubbed into ``out``: every planted secret was in ``cap`` and none is in ``out``."""
    assert all(secret in dump(cap) for secret in MUST_GO)  # planted where the scrub reads
    scrub_capture(cap, out)
    text = dump(out)
    for secret in MUST_GO:
        assert secret not in text, f"{secret!r} left in the scrubbed copy"
    assert "/home/alice" not in text
    return text


def test_secrets_inside_paths_go_from_logs_gzip_csv_and_json(tmp_path: Path) -> None:
    cap = synthetic.capture("csv", 20, tmp_path / "cache", dest=tmp_path / "cap")
    lines = "\n".join(f"path {p}" for p in PLANTED) + "\n"
    (cap / "run.log").write_text(lines)
    (cap / "app.log.gz").write_bytes(gzip.compress(lines.encode()))
    (marker,) = cap.glob("*_marker_api_trace.csv")
    marker.write_text(
        marker.read_text()
        + "".join(f'"MARKER_CORE_API","{p}",31337,31337,{999990 + i},1,1\n' for i, p in enumerate(PLANTED))
    )
    (cap / "rocroof-collect.json").write_text(json.dumps({"notes": PLANTED, "cwd": PLANTED[0]}))
    assert all(secret in dump(cap) for secret in MUST_GO)  # planted where the scrub reads
    report = scrub_capture(cap, tmp_path / "clean")
    text = dump(tmp_path / "clean")
    assert {"run.log", "app.log.gz", marker.name, "rocroof-collect.json"} <= set(report.written)
    for secret in MUST_GO:
        assert secret not in text, f"{secret!r} left in the scrubbed copy"
    assert "/home/alice" not in text
    assert f"path token={REDACTED}\n" in text  # the trial's line, in the log


def test_secrets_in_json_keys_go(tmp_path: Path) -> None:
    """A JSON object keyed by text the scrub redacts (paths, secrets) loses it from its keys too."""
    cap = synthetic.capture("csv", 20, tmp_path / "cache", dest=tmp_path / "cap")
    keyed = {p: {"n": i, "path": p} for i, p in enumerate(PLANTED)}
    keyed["ops"] = 3  # a plain key stays as it is
    (cap / "rocroof-collect.json").write_text(json.dumps({"models": keyed}))
    _scrubbed_without_secrets(cap, tmp_path / "clean")
    models = json.loads((tmp_path / "clean" / "rocroof-collect.json").read_text())["models"]
    assert len(models) == len(PLANTED) + 1  # keys that redact alike are numbered, none lost
    assert models["ops"] == 3
    assert sorted(v["n"] for k, v in models.items() if k != "ops") == list(range(len(PLANTED)))


def test_secrets_inside_paths_go_from_sqlite_cells_of_every_type(tmp_path: Path) -> None:
    cap = synthetic.capture("rocpd", 20, tmp_path / "cache", dest=tmp_path / "cap")
    (db,) = cap.glob("*_results.db")
    with sqlite3.connect(db) as con:
        process = next(
            r[0]
            for r in con.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'rocpd_info_process%'"
            )
        )
        string = next(
            r[0]
            for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'rocpd_string%'")
        )
        # SQLite keeps text that is no number as text in an INTEGER column, and bytes as a BLOB
        con.execute(f'UPDATE "{process}" SET pid = ?', (PLANTED[0],))
        con.execute(f'UPDATE "{process}" SET command = ?', (" ".join(PLANTED).encode(),))
        # each string its own (rocpd_string.string is UNIQUE: two that redact alike would collide)
        con.executemany(f'INSERT INTO "{string}" (string) VALUES (?)', [(f"s{i} {p}",) for i, p in enumerate(PLANTED)])
    con.close()
    _scrubbed_without_secrets(cap, tmp_path / "clean")


# ---- files that are not the text their name says -----------------------------------------------------

BINARY = bytes(range(256)) * 4  # NUL bytes and every other byte value: no text


def test_a_folder_of_notes_and_binary_data_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    # the trial's folder: ingest refuses it; scrub copied both files as they were
    junk = tmp_path / "junk"
    junk.mkdir()
    (junk / "notes.txt").write_text("remember to rerun\n")
    (junk / "kernel_trace.csv").write_bytes(BINARY)
    result = CliRunner().invoke(cli, ["scrub", str(junk), "--out", str(tmp_path / "junk-out")])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert result.output.startswith(f"Error: {junk}: no profiler output to scrub (none of its 2 file(s)")
    assert "kernel_trace.csv: binary data (a NUL byte at offset 0)" in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert not (tmp_path / "junk-out").exists()


def test_files_of_a_text_kind_that_are_not_utf8_text_are_left_out_and_listed(tmp_path: Path) -> None:
    cap = synthetic.capture("csv", 20, tmp_path / "cache", dest=tmp_path / "cap")
    (cap / "bin.log").write_bytes(b"token=ghp_FFFFSECRET6\x00" + BINARY)
    (cap / "utf16.txt").write_bytes("password=pw-Utf16-Secret\n".encode("utf-16"))
    (cap / "latin1.log").write_bytes("caf\xe9 password=pw-Latin1-Secret\n".encode("latin-1"))
    (cap / "packed.log.gz").write_bytes(gzip.compress(BINARY))
    (cap / "hip_api_trace.csv").write_bytes(BINARY)  # a name scrub keeps
    (cap / "data.xyz").write_text("token=ghp_FFFFSECRET6\n")  # a file rocroof does not read
    report = scrub_capture(cap, tmp_path / "clean")
    assert report.dropped["bin.log"] == "binary data (a NUL byte at offset 21), not UTF-8 text: scrub cannot check it"
    # UTF-16: the BOM (ff fe), then "p" as 70 00
    assert report.dropped["utf16.txt"].startswith("binary data (a NUL byte at offset 3)")
    assert report.dropped["latin1.log"] == "not UTF-8 text (byte 0xe9 at offset 3): scrub cannot check it"
    assert report.dropped["packed.log.gz"].startswith("binary data (a NUL byte at offset 0)")
    assert report.dropped["hip_api_trace.csv"].startswith("binary data (a NUL byte at offset 0)")
    assert report.dropped["data.xyz"] == "a file rocroof does not read"
    for name in ("bin.log", "utf16.txt", "latin1.log", "packed.log.gz", "hip_api_trace.csv", "data.xyz"):
        assert not (tmp_path / "clean" / name).exists()
    assert any(n.endswith("kernel_trace.csv") for n in report.written)  # the capture itself is kept
    text = dump(tmp_path / "clean")
    for secret in ("FFFFSECRET6", "pw-Latin1-Secret"):
        assert secret not in text
    # the CLI lists each, with its reason
    result = CliRunner().invoke(cli, ["scrub", str(cap), "--out", str(tmp_path / "clean2")])
    assert result.exit_code == 0, result.output
    assert "    latin1.log: not UTF-8 text (byte 0xe9 at offset 3): scrub cannot check it\n" in result.output
    assert "  left out (6):\n" in result.output


def test_a_damaged_text_kind_still_fails_the_scrub(tmp_path: Path) -> None:
    # text that is no JSON stays an error (the file is what its name says, and broken): not left out
    cap = synthetic.capture("csv", 20, tmp_path / "cache", dest=tmp_path / "cap")
    (cap / "rocroof-collect.json").write_text("{not json")
    with pytest.raises(InputError, match="invalid JSON; cannot scrub it"):
        scrub_capture(cap, tmp_path / "clean")


def test_rocpd_strings_that_redact_alike_stay_apart_and_the_copy_ingests(tmp_path: Path) -> None:
    """rocpd_string.string is UNIQUE: two messages differing only in a path's folders (or a token) became one
    value, and the scrub failed with "not a readable SQLite database (UNIQUE constraint failed ...)"."""
    cap = synthetic.capture("rocpd", 20, tmp_path / "cache", dest=tmp_path / "cap")
    (db,) = cap.glob("*_results.db")
    with sqlite3.connect(db) as con:
        string = next(
            r[0]
            for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'rocpd_string%'")
        )
        before = con.execute(f'SELECT COUNT(*) FROM "{string}"').fetchone()[0]
        alike = ["load /home/alice/m/x.gguf", "load /home/bob/n/x.gguf", "load /data/x.gguf", "load x.gguf"]
        con.executemany(f'INSERT INTO "{string}" (string) VALUES (?)', [(s,) for s in alike])
    con.close()
    report = scrub_capture(cap, tmp_path / "clean")
    (out,) = (tmp_path / "clean").glob("*_results.db")
    con = sqlite3.connect(out)
    try:
        values = [v for (v,) in con.execute(f"SELECT string FROM \"{string}\" WHERE string LIKE 'load %' ORDER BY id")]
        total = con.execute(f'SELECT COUNT(*) FROM "{string}"').fetchone()[0]
    finally:
        con.close()
    # by hand: every path is cut to x.gguf; the plain "load x.gguf" row (inserted last) is one of the four
    assert sorted(values) == ["load x.gguf", "load x.gguf <2>", "load x.gguf <3>", "load x.gguf <4>"]
    assert total == before + 4  # no row lost: other tables point at them by id
    assert report.removed["value told apart after redaction (<n> appended)"] == 3
    result = CliRunner().invoke(cli, ["ingest", str(tmp_path / "clean"), "--db", str(tmp_path / "r.db")])
    assert result.exit_code == 0, result.output
