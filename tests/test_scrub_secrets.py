"""rocroof scrub leaves no secret in any output byte, in every format, and keeps the numbers.

Each test plants secrets of every kind (tokens in environments, command lines and logs, host and
user names, UUIDs, e-mail addresses, home paths, the application's own output, unknown tables and
files, a symbolic link out of the capture) into a capture of one format, scrubs it, and searches
every byte of the output: gzip decompressed, SQLite dumped as SQL text. What must disappear is
known here, independently of rocroof.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import sqlite3
from pathlib import Path

import pytest

from rocroof.capture.readers import read_capture
from rocroof.capture.scrub import Redactor, ScrubReport, scrub_capture
from rocroof.errors import InputError
from rocroof.ingest.pipeline import build_run
from rocroof.store import Store

from . import synthetic
from .conftest import REPO, add_nsys_identity_tables, fixture_path, writable_copy
from .rocprof_legacy_files import Kernel, kernel_csv, results_db, sysinfo
from .rpd_files import Call, Marker, write_rpd

TOKEN = "hf_Zq9SecretTokenValue42"
API_KEY = "sk-live-0123456789abcdef"
HOST = "gpu-node-4711.cluster.example.org"
SHORT_HOST = "gpu-node-4711"
USER = "alice-the-user"
EMAIL = "alice.the.user@example.org"
UUID = "cbed9eed-64b9-8aa6-c069-cbc488647d21"
AMD_UUID = "GPU-5c4b9d8b5e2f3a1c"
HOME = f"/home/{USER}/models"
APP_OUTPUT = "the answer the application printed 7c1f"
SECRETS = (TOKEN, API_KEY, HOST, SHORT_HOST, USER, EMAIL, "example.org", UUID, AMD_UUID, HOME, APP_OUTPUT)
#: Planted in files and tables rocroof does not read: they must go whole.
UNKNOWN = "unknown-table-or-file-9f3e"


def dump(root: Path) -> str:
    """Every byte under ``root`` as text: gzip decompressed, SQLite databases dumped as SQL (and the
    text their BLOBs hold)."""
    parts = []
    for f in sorted(root.rglob("*")):
        if not f.is_file() or f.is_symlink():
            continue
        data = f.read_bytes()
        if data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
        if data[:16] == b"SQLite format 3\x00":
            # dumped from memory: a copy beside the file would appear, for a moment, inside the
            # committed examples, where a test running at the same time could read it
            con = sqlite3.connect(":memory:")
            con.deserialize(data)
            parts.append("\n".join(con.iterdump()))
            # iterdump writes a BLOB as hex: the text it holds, for the search
            for (table,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall():
                for row in con.execute(f'SELECT * FROM "{table}"'):
                    parts += [v.decode("utf-8", errors="replace") for v in row if isinstance(v, bytes)]
            con.close()
        else:
            parts.append(data.decode("utf-8", errors="replace"))
    return "\n".join(parts)


def assert_clean(root: Path) -> None:
    text = dump(root)
    for secret in (*SECRETS, UNKNOWN):
        assert secret not in text, f"{secret!r} left in the scrubbed copy"
    # rocpd names its run by a random UUID (table suffixes, guid): the only UUIDs that may stay
    run_ids = set(re.findall(r"guid[^\n]*?([0-9a-f]{8}(?:[-_][0-9a-f]{4}){3}[-_][0-9a-f]{12})", text, re.I))
    for found in re.findall(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", text, re.I):
        assert found in run_ids or found.replace("-", "_") in text, f"a UUID left in the scrubbed copy: {found}"


def numbers(cap: Path, db: Path, arch: str | None = None) -> list[tuple[object, ...]]:
    Store(db).write_run(build_run(read_capture(cap), arch_override=arch))
    rows = Store(db, read_only=True).query(
        "SELECT dispatch_index, op, invocation, duration_ns, dram_read_bytes, dram_write_bytes "
        "FROM dispatch_dram ORDER BY dispatch_index"
    )
    return [tuple(r) for r in rows.itertuples(index=False)]


def plant_files(cap: Path, outside: Path) -> None:
    """An unknown file, a log with secrets, and a symbolic link to a file outside the capture."""
    (cap / "notes.bin").write_text(f"{UNKNOWN} {TOKEN}")
    (cap / "stderr.log").write_text(
        f"export HF_TOKEN={TOKEN}\nexport API_KEY='{API_KEY}'\nrunning on {SHORT_HOST} as {USER} ({EMAIL})\n"
        f"loading {HOME}/m.gguf; device {UUID}\n"
    )
    outside.write_text(f"{UNKNOWN} {TOKEN} {API_KEY}")
    os.symlink(outside, cap / "creds.log")


def scrub_and_check(cap: Path, tmp_path: Path, arch: str | None = None) -> None:
    report = scrub_capture(cap, tmp_path / "clean", compress=True, extra_hosts=[HOST])
    assert_clean(tmp_path / "clean")
    assert report.dropped["creds.log"] == "symbolic link (never followed)"
    assert "notes.bin" in report.dropped
    assert numbers(tmp_path / "clean", tmp_path / "b.db", arch) == numbers(cap, tmp_path / "a.db", arch)


def test_nsight_capture(tmp_path: Path) -> None:
    cap = tmp_path / "cap"
    writable_copy(REPO / "examples" / "h200" / "dense-prefill", cap)
    db = cap / "trace" / "nsys.sqlite"
    db.write_bytes(gzip.decompress((cap / "trace" / "nsys.sqlite.gz").read_bytes()))
    (cap / "trace" / "nsys.sqlite.gz").unlink()
    with sqlite3.connect(db) as con:
        add_nsys_identity_tables(con)
        con.executemany(
            "INSERT INTO META_DATA_CAPTURE (name, value) VALUES (?, ?)",
            [
                ("PROCESS_0:ENVIRONMENT_VARIABLE", f'HF_TOKEN="{TOKEN}"'),
                ("PROCESS_0:USER_NAME", USER),
                ("PROCESS_0:WORKING_DIR", HOME),
            ],
        )
        con.execute(
            "INSERT INTO TARGET_INFO_SYSTEM_ENV (globalVid, devStateName, name, nameEnum, value) VALUES "
            "(1, 'x', 'Hostname', 619, ?), (1, 'x', 'GpuInfo', 620, ?)",
            (HOST, json.dumps({"uuid": UUID, "busLocation": "0000:00:06.0"})),
        )
        con.execute("INSERT INTO META_DATA_EXPORT (name, value) VALUES ('EXPORT_HOST', ?)", (HOST,))
        con.execute("INSERT INTO StringIds (id, value) VALUES (999999, ?)", (f"{APP_OUTPUT} {EMAIL}",))
        con.execute("UPDATE TARGET_INFO_GPU SET uuid = ?", (UUID,))
        con.execute("CREATE TABLE MY_NOTES (note TEXT)")
        con.execute("INSERT INTO MY_NOTES VALUES (?)", (UNKNOWN,))
    con.close()
    manifest = json.loads((cap / "rocroof-collect.json").read_text())
    manifest["host"] = HOST
    manifest["passes"][0]["env"]["HF_TOKEN"] = TOKEN
    manifest["command"] += ["--hf-token", TOKEN, f"--api-key={API_KEY}", "-m", f"{HOME}/m.gguf"]
    (cap / "rocroof-collect.json").write_text(json.dumps(manifest, indent=2))
    (cap / "trace" / "nsys.log").write_text(f"export HF_TOKEN={TOKEN}\nProcessing on {SHORT_HOST}\n")
    (cap / "ncu" / "ncu.log").write_text(f"==PROF== Connected to {HOME}/llama-bench\nexport API_KEY={API_KEY}\n")
    plant_files(cap, tmp_path / "creds.txt")
    scrub_and_check(cap, tmp_path)
    # the timeline tables stay; the environment, host and application-output tables go
    out = tmp_path / "clean" / "trace" / "nsys.sqlite.gz"
    plain = tmp_path / "out.sqlite"
    plain.write_bytes(gzip.decompress(out.read_bytes()))
    with sqlite3.connect(plain) as con:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    con.close()
    assert {"CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS", "StringIds"} <= tables
    assert not tables & {"META_DATA_CAPTURE", "TARGET_INFO_SYSTEM_ENV", "ProcessStreams", "MY_NOTES"}


def test_rocprofv3_csv_capture(tmp_path: Path) -> None:
    cap = synthetic.capture("csv", 40, tmp_path / "cache", dest=tmp_path / "cap")
    (agent,) = cap.glob("*_agent_info.csv")
    lines = agent.read_text().splitlines()
    header = lines[0].split(",")
    for row_no in range(1, len(lines)):
        cells = lines[row_no].split(",")
        cells[header.index('"Location_Id"')] = "7777123"
        cells[header.index('"Hive_Id"')] = "918273645"
        lines[row_no] = ",".join(cells)
    agent.write_text("\n".join(lines) + "\n")
    (marker,) = cap.glob("*_marker_api_trace.csv")
    marker.write_text(
        marker.read_text() + f'"MARKER_CORE_API","user={USER} HF_TOKEN={TOKEN} {EMAIL}",31337,31337,999999,1,1\n'
    )
    plant_files(cap, tmp_path / "creds.txt")
    report = scrub_capture(cap, tmp_path / "clean", compress=True, extra_hosts=[HOST])
    assert_clean(tmp_path / "clean")
    assert report.dropped["creds.log"] == "symbolic link (never followed)"
    assert "7777123" not in dump(tmp_path / "clean") and "918273645" not in dump(tmp_path / "clean")
    assert numbers(tmp_path / "clean", tmp_path / "b.db") == numbers(cap, tmp_path / "a.db")


def test_rocpd_capture(tmp_path: Path) -> None:
    cap = synthetic.capture("rocpd", 40, tmp_path / "cache", dest=tmp_path / "cap")
    (db,) = cap.glob("*_results.db")
    with sqlite3.connect(db) as con:
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]

        def physical(logical: str) -> str:
            return next(t for t in tables if t.startswith(logical + "_0"))

        env = json.dumps({"HF_TOKEN": TOKEN, "HOME": HOME, "MAIL": EMAIL, "GGML_CUDA_MARKERS": "1"})
        con.execute(
            f'UPDATE "{physical("rocpd_info_process")}" SET environment = ?, command = ?',
            (env, f"llama-bench --hf-token {TOKEN} -m {HOME}/m.gguf"),
        )
        con.execute(f'UPDATE "{physical("rocpd_info_node")}" SET hostname = ?, machine_id = ?', (HOST, UUID))
        con.execute(f'UPDATE "{physical("rocpd_info_agent")}" SET uuid = ?', (AMD_UUID,))
        con.execute("CREATE TABLE rocpd_arg_0000ddb5_8903_7903_b269_cd8d3745bb8a (value TEXT)")
        con.execute("INSERT INTO rocpd_arg_0000ddb5_8903_7903_b269_cd8d3745bb8a VALUES (?)", (UNKNOWN,))
    con.close()
    plant_files(cap, tmp_path / "creds.txt")
    scrub_and_check(cap, tmp_path)
    text = dump(tmp_path / "clean")
    assert '"GGML_CUDA_MARKERS": "1"' in text  # the variables that shaped the run stay


def test_rocprof_compute_workload(tmp_path: Path) -> None:
    cap = tmp_path / "cap"
    writable_copy(fixture_path("rocprof-compute", "vcopy", "MI100"), cap)
    info = (cap / "sysinfo.csv").read_text().splitlines()
    info[1] = (
        info[1]
        .replace("t007-001.hpcfund", HOST)
        .replace("./tests/vcopy -n 1048576", f"./tests/vcopy --api-key {API_KEY} -n 1048576")
    )
    (cap / "sysinfo.csv").write_text("\n".join(info) + "\n")
    (cap / "log.txt").write_text((cap / "log.txt").read_text() + f"\n{EMAIL} {HOME} HF_TOKEN={TOKEN}\n")
    (cap / "pmc_kernel_top.csv").write_text(f"Kernel_Name\n{UNKNOWN}\n")
    plant_files(cap, tmp_path / "creds.txt")
    scrub_and_check(cap, tmp_path)
    assert "t007-001" not in dump(tmp_path / "clean")  # the recorded host, learned from sysinfo.csv


def test_legacy_rocprof_capture(tmp_path: Path) -> None:
    cap = tmp_path / "cap"
    cap.mkdir()
    kernels = [Kernel("k", 100 + i, 1_000 * i, 1_000 * i + 500, 1_000 * i + 600) for i in range(1, 5)]
    kernel_csv(cap / "results.csv", kernels, stats=True)
    results_db(cap / "results.db", kernels, [(50, 900, 4242, 4242, f"ggml:ADD:x:1 {EMAIL}")])
    with sqlite3.connect(cap / "results.db") as con:
        con.execute("CREATE TABLE SECRETS (v TEXT)")
        con.execute("INSERT INTO SECRETS VALUES (?)", (UNKNOWN,))
    con.close()
    info = sysinfo(cap / "results.sysinfo.txt")
    info.write_text(info.read_text().replace("GPU-0123456789abcdef", AMD_UUID))
    (cap / "cmd").write_text(f"./app --hf-token {TOKEN} -m {HOME}/m.gguf\n")
    (cap / "results.stats.csv").write_text(f'"Name","Calls"\n"{UNKNOWN}",1\n')
    plant_files(cap, tmp_path / "creds.txt")
    scrub_and_check(cap, tmp_path)


def _rpd_with_secrets(cap: Path) -> None:
    """``cap/trace.rpd``: four kernels launched by hipLaunchKernel, a ggml range carrying secrets."""
    cap.mkdir()
    calls = [
        Call("hipLaunchKernel", 100 * i, 100 * i + 50, ops=[("k", 9_000 + 10 * i, 9_005 + 10 * i, "KernelExecution")])
        for i in range(1, 5)
    ]
    write_rpd(cap / "trace.rpd", calls, [Marker(f"ggml:ADD:x:1 {EMAIL} HF_TOKEN={TOKEN}", 50, 1_000)])


def test_rpd_capture(tmp_path: Path) -> None:
    cap = tmp_path / "cap"
    _rpd_with_secrets(cap)
    with sqlite3.connect(cap / "trace.rpd") as con:
        con.execute("CREATE TABLE rocpd_monitor (deviceType TEXT, value TEXT)")
        con.execute("INSERT INTO rocpd_monitor VALUES ('gpu', ?)", (UNKNOWN,))
        con.execute("CREATE TABLE ext_callstack (frame TEXT)")
        con.execute("INSERT INTO ext_callstack VALUES (?)", (f"{HOME}/app.py:12 {UNKNOWN}",))
    con.close()
    plant_files(cap, tmp_path / "creds.txt")
    scrub_and_check(cap, tmp_path, arch="gfx942")


@pytest.mark.parametrize("example", sorted(p.parent for p in (REPO / "examples").rglob("rocroof-collect.json")))
def test_committed_examples_hold_no_identifier(example: Path) -> None:
    """The examples recorded on the lent H200 carry no UUID, no host record, no environment, no app output."""
    text = dump(example)
    assert not re.search(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", text, re.I)
    for table in ("META_DATA_CAPTURE", "TARGET_INFO_SYSTEM_ENV", "ProcessStreams", "META_DATA_EXPORT"):
        assert f'CREATE TABLE "{table}"' not in text and f"CREATE TABLE {table}" not in text, table
    assert not re.search(r"(?m)^\s*export [A-Z_]+=", text)


def test_gpu_uuids_header_tokens_passwords_and_url_users_go(tmp_path: Path) -> None:
    # as nvidia-smi and CUDA_VISIBLE_DEVICES write a GPU (GPU-<uuid>, MIG-<uuid>), an HTTP header in a
    # curl command, a YAML-style password, a proxy URL with a user, an address: all identify or unlock
    gpu = "8f3c2a1b-1234-4cde-9abc-0123456789ab"
    bearer = "sk-live-ab12cd34ef56"
    password = "hunter2-correct-horse"
    proxy_user, proxy_pw = "bob-the-proxy-user", "pr0xy-pw"
    address = "10.20.30.40"
    cap = tmp_path / "cap"
    shutil.copytree(REPO / "examples" / "h200" / "dense-prefill", cap)
    manifest = cap / "rocroof-collect.json"
    data = json.loads(manifest.read_text())
    data["passes"][0]["env"]["CUDA_VISIBLE_DEVICES"] = f"GPU-{gpu}"
    data["passes"][0]["env"]["GGML_CUDA_API_KEY"] = "kept-name-but-secret-json-key"
    data["api_key"] = "a-json-secret-value"
    data["credentials"] = {"accessToken": "camel-token-1", "private_key": "pk-json-2", "pass": "pass-json-3"}
    data["password"] = 12345678
    data["passes"][0]["command"] = ["llama-cli", "-hft", "hf-short-flag-4"]
    manifest.write_text(json.dumps(data))
    (cap / "run.log").write_text(
        f"GPU 0: NVIDIA H200 (UUID: GPU-{gpu})\nMIG-{gpu}\n"
        f'curl -H "Authorization: Bearer {bearer}" https://example.org/x\n'
        f"password: {password}\nexport https_proxy=http://{proxy_user}:{proxy_pw}@proxy.lan:3128\n"
        f"server at {address}:8080\n"
        "llama_perf_context_print: n_tokens: 512\n"
        "print_info: BOS token        = 151643\n"
        "password = spaced-pw-444\ndb_pass: pw-666-x\nprivate_key: pk-2323-x\naccessToken: at-1313-x\n"
        "ghp_abcdefghijklmnopqrstuvwxyz0123 sk-proj-abcdefghijklmnop1234 hf_abcdefghijklmnopqrstuvwxyz\n"
        "https://carol:pa/ss1616@proxy.example\nmac aa:bb:cc:dd:ee:0f\n"
    )
    scrub_capture(cap, tmp_path / "clean")
    text = dump(tmp_path / "clean")
    for secret in (
        *(gpu, bearer, password, proxy_user, proxy_pw, address, "a-json-secret-value"),
        *("spaced-pw-444", "pw-666-x", "pk-2323-x", "at-1313-x", "ghp_abcdefghij", "sk-proj-abcdef", "hf_abcdefghij"),
        *("carol", "ss1616", "aa:bb:cc:dd:ee:0f", "camel-token-1", "pk-json-2", "pass-json-3", "12345678"),
        "hf-short-flag-4",
    ):
        assert secret not in text, f"{secret!r} left in the scrubbed copy"
    # what is not a secret stays: a llama.cpp count that has "token" in its name
    assert "n_tokens: 512" in text
    assert "BOS token        = 151643" in text  # a token id in llama.cpp's log, not a secret


def test_a_one_file_capture_is_scrubbed_into_the_folder(tmp_path: Path) -> None:
    # `rocroof ingest trace.rpd` reads a one-file capture; scrub takes the same file (it refused
    # anything but a directory)
    cap = tmp_path / "cap"
    _rpd_with_secrets(cap)
    (cap / "beside.log").write_text(f"not part of the one-file capture {TOKEN}")
    report = scrub_capture(cap / "trace.rpd", tmp_path / "clean")
    assert sorted(p.name for p in (tmp_path / "clean").iterdir()) == ["trace.rpd"]
    assert report.written == ["trace.rpd"]
    assert_clean(tmp_path / "clean")
    assert numbers(tmp_path / "clean" / "trace.rpd", tmp_path / "b.db", "gfx942") == numbers(
        cap / "trace.rpd", tmp_path / "a.db", "gfx942"
    )
    (cap / "notes.txt.bin").write_text("x")
    with pytest.raises(InputError, match="notes.txt.bin: a file rocroof does not read; scrub takes a capture"):
        scrub_capture(cap / "notes.txt.bin", tmp_path / "clean2")


def test_a_symbolic_link_to_a_capture_file_is_named_as_one(tmp_path: Path) -> None:
    # scrub never follows links (a link could lead out of what the user meant to share): it says so
    _rpd_with_secrets(tmp_path / "cap")
    (tmp_path / "link.rpd").symlink_to(tmp_path / "cap" / "trace.rpd")
    with pytest.raises(InputError, match=r"link.rpd: a symbolic link \(scrub never follows one: give its target\)"):
        scrub_capture(tmp_path / "link.rpd", tmp_path / "clean")
    with pytest.raises(InputError, match=r"missing.rpd: no such file; expected a capture directory"):
        scrub_capture(tmp_path / "missing.rpd", tmp_path / "clean")


def test_ipv6_addresses_and_database_and_sshpass_passwords_go(tmp_path: Path) -> None:
    # IPv6 in its full and ::-compressed forms, and passwords on a MySQL client's or sshpass's command
    # line, are redacted; C++ kernel names with ::, times, llama.cpp's -p (the prompt) and ssh's -p
    # (a port) are not addresses or passwords, and stay byte for byte
    cap = tmp_path / "cap"
    writable_copy(REPO / "examples" / "h200" / "dense-prefill", cap)
    # two kernels renamed to C++ names with namespaces, in both passes (ncu's names and nsys's)
    ncu = cap / "ncu" / "ncu_raw.csv.gz"
    text = gzip.decompress(ncu.read_bytes()).decode()
    assert text.count('"void rms_norm_f32<') == 18 and text.count('"void mul_mat_q<') == 50
    text = text.replace('"void rms_norm_f32<', '"void at::native::rms_norm_f32<')
    ncu.write_bytes(gzip.compress(text.replace('"void mul_mat_q<', '"void c10::ggml_cuda::mul_mat_q<').encode()))
    nsys = cap / "trace" / "nsys.sqlite.gz"
    plain = tmp_path / "nsys.sqlite"
    plain.write_bytes(gzip.decompress(nsys.read_bytes()))
    with sqlite3.connect(plain) as con:
        for old, new in (
            ("void rms_norm_f32<", "void at::native::rms_norm_f32<"),
            ("void mul_mat_q<", "void c10::ggml_cuda::mul_mat_q<"),
        ):
            n = con.execute(
                "UPDATE StringIds SET value = replace(value, ?, ?) WHERE value LIKE ?", (old, new, old + "%")
            )
            assert n.rowcount == 1
    con.close()
    nsys.write_bytes(gzip.compress(plain.read_bytes()))
    manifest = cap / "rocroof-collect.json"
    data = json.loads(manifest.read_text())
    assert data["command"][3:5] == ["-p", "512"]  # llama-bench's prompt length
    data["passes"][0]["command"] = ["sshpass", "-p", "pw-sshpass-4", "ssh", "-p", "2222", "gpu-box"]
    data["passes"][1]["command"] = ["/usr/bin/mysql", "-u", "bench", "-ppw-mysql-5", "results"]
    manifest.write_text(json.dumps(data))
    (cap / "run.log").write_text(
        "inet6 fe80::1ff:fe23:4567:890a%eth0 prefixlen 64\n"
        "connecting to [2001:db8::8a2e:370:7334]:443\n"
        "listening on ::1 port 8080, ::ffff:10.20.30.41 and 2001:0db8:85a3:0000:0000:8a2e:0370:7334.\n"
        "mysql -u bench -ppw-mysql-1 results < dump.sql\n"
        "mysqldump --password=pw-mysql-2 results; mysql -p results\n"
        "sshpass -p 'pw sshpass 3' ssh -p 2222 gpu-box\n"
        "12:34:56.789 launch void at::native::vectorized_elementwise_kernel<4>(int) after ggml_cuda::mul_mat\n"
        "void c10::cuda::foo<cafe::f16>(c10::Half *, add::f16 *) at 12:34:56\n"
        'llama-completion -m m.gguf -p "tell me about 2001:" -n 16\n'
        "mac aa:bb:cc:dd:ee:0f\n"
    )
    scrub_capture(cap, tmp_path / "clean")
    assert (tmp_path / "clean" / "run.log").read_text() == (
        "inet6 <ip> prefixlen 64\n"
        "connecting to [<ip>]:443\n"
        "listening on <ip> port 8080, <ip> and <ip>.\n"
        "mysql -u bench -p<redacted> results < dump.sql\n"
        "mysqldump --password=<redacted> results; mysql -p results\n"
        "sshpass -p <redacted> ssh -p 2222 gpu-box\n"
        "12:34:56.789 launch void at::native::vectorized_elementwise_kernel<4>(int) after ggml_cuda::mul_mat\n"
        "void c10::cuda::foo<cafe::f16>(c10::Half *, add::f16 *) at 12:34:56\n"
        'llama-completion -m m.gguf -p "tell me about 2001:" -n 16\n'
        "mac <mac>\n"
    )
    clean = json.loads((tmp_path / "clean" / "rocroof-collect.json").read_text())
    assert clean["command"] == data["command"]  # llama-bench ... -p 512 ...
    assert clean["passes"][0]["command"] == ["sshpass", "-p", "<redacted>", "ssh", "-p", "2222", "gpu-box"]
    assert clean["passes"][1]["command"] == ["mysql", "-u", "bench", "-p<redacted>", "results"]

    def kernels(capture: Path, db: Path) -> list[tuple[object, ...]]:
        Store(db).write_run(build_run(read_capture(capture)))
        rows = Store(db, read_only=True).query(
            "SELECT dispatch_index, kernel_name, duration_ns, dram_read_bytes FROM dispatch_dram "
            "ORDER BY dispatch_index"
        )
        return [tuple(r) for r in rows.itertuples(index=False)]

    before, after = kernels(cap, tmp_path / "a.db"), kernels(tmp_path / "clean", tmp_path / "b.db")
    assert after == before
    names = {str(r[1]).split("<")[0] for r in after}
    assert {"void at::native::rms_norm_f32", "void c10::ggml_cuda::mul_mat_q"} <= names


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # redis-cli (and redis-benchmark, valkey-cli): the word after -a or --pass, whatever it is
        ("redis-cli -h db1 -p 6379 -a s3cr3t-redis ping", "redis-cli -h db1 -p 6379 -a <redacted> ping"),
        ("redis-cli --pass 'pw with spaces' -n 0 GET k", "redis-cli --pass <redacted> -n 0 GET k"),
        ("/usr/bin/valkey-cli -a pw-valkey-1 --no-auth-warning", "valkey-cli -a <redacted> --no-auth-warning"),
        ("redis-benchmark -q -a pw-bench-2 -n 1000", "redis-benchmark -q -a <redacted> -n 1000"),
        # redis-cli refuses -a=, but a mistyped one still holds the password; ls -a after it is ls's
        ("redis-cli -a=pw-typo-3 ping; ls -a", "redis-cli -a=<redacted> ping; ls -a"),
        # mongosh, the legacy mongo shell and the Database Tools: -p SECRET, -p=SECRET, -pSECRET
        (
            "mongosh mongodb://db0:27017/test -u bob -p pw-mongosh-4 --quiet",
            "mongosh mongodb://db0:27017/test -u bob -p <redacted> --quiet",
        ),
        ("mongo -u bob -p=pw-mongo-5 test", "mongo -u bob -p=<redacted> test"),
        ("mongo -u bob -ppw-mongo-6 test", "mongo -u bob -p<redacted> test"),
        ("mongodump -u bob -p pw-dump-7 -d test", "mongodump -u bob -p <redacted> -d test"),
        # IPv6 addresses of two letter-led parts, first group a ULA, link-local or multicast prefix
        ("inet6 fe80::abcd%eth0 prefixlen 64", "inet6 <ip> prefixlen 64"),
        ("peers fe80::1%eth0 fe80::beef%eth1", "peers <ip> <ip>"),  # with a digit, as before; letters too
        ("route fd00::beef/64 via [FE80::ABCD]:22", "route <ip>/64 via [<ip>]:22"),
        ("mdns to ff02::fb, prefix fe80::, ula fdab::c", "mdns to <ip>, prefix <ip>, ula <ip>"),
    ],
)
def test_redis_mongo_passwords_and_letter_ipv6_addresses_go(text: str, expected: str) -> None:
    redact = Redactor(ScrubReport())
    assert redact(text) == expected
    assert redact(expected) == expected  # a scrubbed text scrubbed again stays as it is


@pytest.mark.parametrize(
    "text",
    [
        # C++ names with two letter-led parts: no group of an address prefix, or a call or a template
        "void foo<ab::cd>(int) calls std::abs, ggml::add and cuda::std",
        "void k<dead::beef, cafe::f16>(add::f16 *) ::beef feed::beef ffee::f fec0::ab",
        "fd00::beef(x) and fe80::abcd<int>",
        # -p and -a of other programs: llama.cpp's prompt, ssh's port, ls's all, mongosh's prompt
        'llama-completion -m m.gguf -p "hi there" -n 16; ssh -p 22 box; ls -a',
        "mongosh -u bob -p --port 27017",
        "mongosh -u bob -p",
        "redis-cli -a= ping",
    ],
)
def test_cpp_names_and_other_programs_short_options_stay(text: str) -> None:
    assert Redactor(ScrubReport())(text) == text


def test_redis_and_mongo_passwords_go_from_logs_and_commands_and_kernel_names_stay(tmp_path: Path) -> None:
    # a capture whose log and manifest hold redis-cli and mongosh passwords and letter-led IPv6
    # addresses, and whose kernel names hold letter-led C++ names: the secrets go, the names stay
    cap = tmp_path / "cap"
    writable_copy(REPO / "examples" / "h200" / "dense-prefill", cap)
    old, new = '"void rms_norm_f32<', '"void rms_norm_f32<dead::beef, fd00::beef<ab::cd>, cafe::f16, '
    ncu = cap / "ncu" / "ncu_raw.csv.gz"
    text = gzip.decompress(ncu.read_bytes()).decode()
    assert text.count(old) == 18
    ncu.write_bytes(gzip.compress(text.replace(old, new).encode()))
    nsys = cap / "trace" / "nsys.sqlite.gz"
    plain = tmp_path / "nsys.sqlite"
    plain.write_bytes(gzip.decompress(nsys.read_bytes()))
    with sqlite3.connect(plain) as con:
        n = con.execute(
            "UPDATE StringIds SET value = replace(value, ?, ?) WHERE value LIKE ?",
            (old[1:], new[1:], old[1:] + "%"),
        )
        assert n.rowcount == 1
    con.close()
    nsys.write_bytes(gzip.compress(plain.read_bytes()))
    manifest = cap / "rocroof-collect.json"
    data = json.loads(manifest.read_text())
    data["passes"][0]["command"] = ["/usr/bin/redis-cli", "-p", "6380", "-a", "pw-redis-8", "ping"]
    data["passes"][1]["command"] = ["mongosh", "-u", "bob", "-p", "pw-mongosh-9", "--port", "27018"]
    manifest.write_text(json.dumps(data))
    (cap / "run.log").write_text(
        "redis-cli -p 6380 --pass pw-redis-10 ping && mongo -u bob -p pw-mongo-11 test\n"
        "peer fe80::abcd%eth0 and fd00::beef up; ff02::fb joined\n"
        "ggml::add at 12:34:56 in void k<dead::beef>(add::f16 *)\n"
    )
    scrub_capture(cap, tmp_path / "clean")
    assert (tmp_path / "clean" / "run.log").read_text() == (
        "redis-cli -p 6380 --pass <redacted> ping && mongo -u bob -p <redacted> test\n"
        "peer <ip> and <ip> up; <ip> joined\n"
        "ggml::add at 12:34:56 in void k<dead::beef>(add::f16 *)\n"
    )
    clean = json.loads((tmp_path / "clean" / "rocroof-collect.json").read_text())
    assert clean["passes"][0]["command"] == ["redis-cli", "-p", "6380", "-a", "<redacted>", "ping"]
    assert clean["passes"][1]["command"] == ["mongosh", "-u", "bob", "-p", "<redacted>", "--port", "27018"]
    clean_ncu = gzip.decompress((tmp_path / "clean" / "ncu" / "ncu_raw.csv.gz").read_bytes()).decode()
    assert clean_ncu.count(new) == 18
    clean_nsys = dump(tmp_path / "clean" / "trace")
    assert clean_nsys.count(new[1:]) == 1
