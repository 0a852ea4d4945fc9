"""Make a capture safe to share: an allow-list of files and tables, and one redaction step for text.

Profiler output records far more than the measurements: the profiled process's whole environment
(tokens included: Nsight Systems' ``META_DATA_CAPTURE``, rocpd's ``rocpd_info_process``), its
command line (``--hf-token ...``), host and user names, GPU UUIDs and bus ids, the application's
own output, paths. :func:`scrub_capture` copies a capture directory keeping only what rocroof
reads or will read for timelines, and passing every string that stays through one
:class:`Redactor`:

* **files** are kept by kind (the readers' own detection): rocprofv3 CSV traces and counters,
  rocprofiler-compute workload CSVs, legacy rocprof kernel tables, Nsight Compute raw CSV,
  Nsight Systems / rocpd / RPD / legacy rocprof SQLite, rocroof's manifest, op metadata and probe
  JSON, and text logs; anything else (binary reports, unknown files, symbolic links, which are
  never followed) is left out and listed with the reason. A file is never copied as it is: a log,
  CSV or JSON file (gzip or not) must be UTF-8 text without NUL bytes, or it is left out and listed
  too (binary data named ``kernel_trace.csv``, a UTF-16 or Latin-1 log: the redactor could not see a
  secret in it); an SQLite file that is no database fails the scrub;
* **SQLite tables** are kept by name per format (kernels, memory copies and sets, synchronisation,
  runtime API, NVTX / roctx, thread and stream names, GPU and device info); the others are
  dropped, with views that read them; identifier columns (UUIDs, bus locations, host names) are
  emptied, environment columns keep only the variables that shaped the run (``GGML_*``...), and
  Nsight's ``StringIds`` keeps only the strings the kept tables name;
* **CSV columns** that name the host are replaced; identifier columns of ``agent_info.csv`` are
  emptied;
* **every remaining string** goes through the redactor: secret-looking ``NAME=value`` pairs and
  ``--flag value`` pairs, ``Authorization:``/``password:``-style fields, bearer tokens and tokens
  known by their prefix, the password of a ``mysql -pSECRET``-style, ``sshpass -p SECRET``,
  ``redis-cli -a SECRET`` or ``mongosh -p SECRET`` command, the user of a URL, host and user names,
  UUIDs (``GPU-``/``MIG-`` forms included), IPv4, IPv6 (a C++ name with ``::`` stays: see
  :func:`_is_ipv6`), MAC and e-mail addresses, absolute paths (cut to their last part first, so
  that a secret that ends a path, ``/home/a/proj/token=...``, is redacted like any other).

Measurements are left as they are: ``rocroof ingest`` of the copy stores the same numbers.
"""

from __future__ import annotations

import csv
import getpass
import gzip
import io
import ipaddress
import json
import os
import re
import shutil
import socket
import sqlite3
import tempfile
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..analysis.bandwidth import BANDWIDTH_FILE
from ..errors import InputError, ParseError
from ..fileio import MAX_LINE_BYTES, is_gzip, logical_name, open_binary, sqlite_connect, sqlite_file, sqlite_tables
from .readers import MANIFEST, SIDECAR_NAME, ggml_meta, nvidia, rocprof_legacy, rocprofv3_csv

#: Binary reports that are dropped (their exports are kept).
BINARY_REPORTS = (".ncu-rep", ".nsys-rep", ".qdstrm", ".rpd-journal")
#: Environment variables kept (they shape the measured run).
KEEP_ENV = re.compile(r"^(GGML_|LLAMA_ARG_|CUDA_VISIBLE_DEVICES|HIP_VISIBLE_DEVICES|ROCR_VISIBLE_DEVICES)")
#: Host names shorter than this are replaced in host fields only, not in free text.
SHORT_HOST = 4
#: What a redacted value becomes.
REDACTED = "<redacted>"

_ABS_PATH = re.compile(r"(?<![\w.~-])/(?:[^\s/\"'`:;,|()<>=]+/)+(?=[^\s/\"'`:;,|()<>=])")
_ENV_ENTRY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
#: A name that says its value is a secret.
_SECRET_NAME = (
    r"[A-Za-z0-9_-]*(?:token|secret|passw|passphrase|api[_-]?key|apikey|credential|auth|cookie|private)[A-Za-z0-9_-]*"
)
_VALUE = r"(?:\"[^\"\n]*\"|'[^'\n]*'|[^\s\"',;]+)"
#: ``NAME=value``: an environment-style name (upper case) or a secret-looking one. A secret-looking
#: name may follow a ``/`` (the last part of a relative path, ``proj/token=...``); an environment-style
#: one may not (``lib/X=1`` is no assignment).
_ASSIGNMENT = re.compile(rf"(?:(?<![\w.=-])((?i:{_SECRET_NAME}))|(?<![\w./=-])([A-Z][A-Z0-9_]+))=(?!=)({_VALUE})")
#: ``--flag value`` / ``--flag=value`` / ``-flag value`` where the flag names a secret (llama.cpp's
#: ``--api-key``, ``--hf-token``).
#: Short flags whose value is a secret (llama.cpp's ``-hft`` is ``--hf-token``).
_SHORT_SECRET_FLAGS = ("-hft",)
_SECRET_FLAG = re.compile(
    rf"(?<![\w-])(--?(?i:{_SECRET_NAME})|{'|'.join(map(re.escape, _SHORT_SECRET_FLAGS))})(=|\s+)(?!-)({_VALUE})"
)
#: ``Name: value`` (an HTTP header, a YAML or log line) where the name says the value is a secret:
#: ``Authorization: Bearer ...``, ``password: ...``, ``hf_token: ...`` (a narrower set of names than
#: :data:`_SECRET_NAME`: llama.cpp's logs print ``n_tokens: 512``). The scheme word goes too.
_NAMED_SECRET = (
    r"(?:proxy-)?authorization|(?:set-)?cookie|[\w-]*(?:passw(?:or)?d|passphrase|secret|api[_-]?key|access[_-]?key"
    r"|private[_-]?key|credentials?)[\w-]*|[\w-]*[_-]pass|[\w-]*[_-]token|[a-z]+Token"
)
#: ...and ``token`` alone, but only before a colon (llama.cpp logs ``BOS token        = 151643``).
_FIELD_NAME = rf"{_NAMED_SECRET}|token"
_SECRET_FIELD = re.compile(
    rf"(?i)(?<![\w.-])(?:({_NAMED_SECRET})([\"']?[ \t]*[:=][ \t]*)|(token)([\"']?[ \t]*:[ \t]*))"
    rf"(?!{re.escape('<redacted>')})((?:(?:bearer|basic|token|digest)[ \t]+)?{_VALUE})"
)
#: A JSON key whose value is a secret: the names above, and a few that are too short to look for in
#: free text (``auth``, ``pass``, ``bearer``). A number under a password-like key goes too.
_SECRET_KEY = re.compile(rf"(?i)(?:{_FIELD_NAME}|auth|pass|bearer|pin)")
_PASSWORD_KEY = re.compile(r"(?i)(?:[\w-]*[_-])?(?:passw(?:or)?d|passphrase|pass|pin)")  # not "bypass", "spin"
#: Tokens recognisable by their prefix wherever they stand: GitHub (``ghp_``..., ``github_pat_``),
#: Hugging Face (``hf_``), OpenAI-style (``sk-``), Slack (``xox?-``), GitLab (``glpat-``), AWS key ids.
_KNOWN_TOKEN = re.compile(
    r"(?<![\w-])(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_\w{20,}|hf_[A-Za-z0-9]{20,}|sk-[A-Za-z0-9_-]{16,}"
    r"|xox[abprs]-[A-Za-z0-9-]{10,}|glpat-[\w-]{20,}|AKIA[0-9A-Z]{16})(?![\w-])"
)
#: A MAC address (six pairs of hex digits).
_MAC = re.compile(r"(?<![\w:-])(?:[0-9A-Fa-f]{2}([:-]))(?:[0-9A-Fa-f]{2}\1){4}[0-9A-Fa-f]{2}(?![\w:-])")
#: ``Bearer <token>`` wherever it stands (a curl command line, a log).
_BEARER = re.compile(r"(?i)(?<![\w-])(bearer)[ \t]+(?!<redacted>)[A-Za-z0-9._~+/=-]{8,}")
#: The user (and password) of a URL: ``https://bob:pw@proxy``.
_URL_USER = re.compile(r"(?i)(?<![\w+.-])([a-z][a-z0-9+.-]*://)[^/\s:@]+(?::[^\s@]*)?@")
_EMAIL = re.compile(r"(?<![\w.+-])[\w.+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+")
#: A UUID, also as nvidia-smi and CUDA_VISIBLE_DEVICES write it (``GPU-<uuid>``, ``MIG-<uuid>``,
#: ``MIG-GPU-<uuid>``), or an AMD ``GPU-<16 hex digits>`` unique id.
_UUID = re.compile(
    r"(?i)(?<![0-9a-f-])(?:(?:MIG-)?GPU-|MIG-)?"
    r"(?:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|(?<=GPU-)[0-9a-f]{16})(?![0-9a-f-])"
)
#: An IPv4 address (each part 0-255), not part of a longer dotted number (a version 1.2.3.4.5).
_IPV4 = re.compile(
    r"(?<![\w.])(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(?![\w.])"
)
#: A candidate IPv6 address: hex groups and colons (two colons at least: ``::1``), an IPv4 tail
#: (``::ffff:10.0.0.1``) and a zone (``fe80::1%eth0``) allowed; not inside a word, a longer run of
#: colons or a dotted number. :func:`_is_ipv6` keeps the valid addresses that are no C++ name.
_IPV6 = re.compile(
    r"(?<![\w:.%])(?:[0-9A-Fa-f]{0,4}:){2,8}(?:(?:\d{1,3}\.){3}\d{1,3}|[0-9A-Fa-f]{1,4})?"
    r"(?:%[A-Za-z0-9_.-]*[A-Za-z0-9_])?(?![\w:%]|\.\w)"
)
#: Programs whose command line carries a password, by family (the group's name); elsewhere ``-p`` and
#: ``-a`` are something else (llama.cpp's prompt, ssh's port, ``ls -a``):
#:
#: * ``mysql``: MySQL's and MariaDB's clients take it attached (``-pSECRET``; ``-p`` alone asks for it,
#:   and a word after it is the database);
#: * ``sshpass``: attached or as the next argument, among the options before the command it runs;
#: * ``redis``: ``redis-cli`` and ``redis-benchmark`` (and Valkey's ``valkey-cli``, ``valkey-benchmark``)
#:   take it as the word after ``-a`` or ``--pass``;
#: * ``mongo``: ``mongosh``, the legacy ``mongo`` shell and the Database Tools (``mongodump``...) take it
#:   after ``-p`` (``-p SECRET``, ``-pSECRET``, ``-p=SECRET``; ``-p`` last or before another option
#:   asks for it). ``--password SECRET`` is a secret flag for every program (:data:`_SECRET_FLAG`).
_PASSWORD_PROGRAM = re.compile(
    r"(?<![\w.-])(?:(?P<mysql>mysql(?:dump|admin|import|show|check|pump|slap|binlog|sh)?"
    r"|mariadb(?:-(?:dump|admin|import|show|check|slap|binlog))?)|(?P<sshpass>sshpass)"
    r"|(?P<redis>(?:redis|valkey)-(?:cli|benchmark))"
    r"|(?P<mongo>mongo(?:sh|dump|restore|export|import|stat|top|files)?))(?![\w.-])"
)
#: sshpass's options that take an argument (the password file, descriptor, prompt): not the password.
_SSHPASS_ARG_OPTIONS = ("-f", "-d", "-P")
#: redis-cli's password options: the next word is the password.
_REDIS_PASSWORD_OPTIONS = ("-a", "--pass")
#: One shell word after a program on the same line (quoted parts kept together); a command
#: separator, a redirection or a newline ends the words.
_SHELL_WORD = re.compile(r"[ \t]+((?:\"[^\"\n]*\"|'[^'\n]*'|[^\s\"';|&<>()`])+)")
_HOME = re.compile(r"(?:/home|/Users|/export/home|/u)/([A-Za-z0-9._-]+)")


#: The first group of a two-part IPv6 address written with letters only (``fd00::beef``): a unique local
#: address (``fc00::/7``), a link-local one (``fe80::/10``) or a multicast one (``ff00::/8``, flags 0-7).
#: Each is 4 hex digits (the values are 0xfc00 or more, so no leading zero is dropped).
_LETTER_ADDRESS_PREFIX = re.compile(r"(?i)f[cd][0-9a-f]{2}|fe[89ab][0-9a-f]|ff[0-7][0-9a-f]")


def _is_ipv6(text: str, after: str = "") -> bool:
    """Whether ``text`` is a valid IPv6 address (zone allowed) that cannot be a C++ name.

    A C++ name joins identifiers with ``::`` and never holds a single ``:``, and an identifier never
    starts with a digit; an address holds ``::`` once at most. So ``c10::cuda::foo`` is no address,
    and a two-part form (``X::Y``, ``X::``, ``::Y``) with a part that starts with a digit is one
    (``fe80::1``, ``::1``, ``2001::``). A time (``12:34:56``) or a MAC address
    (``aa:bb:cc:dd:ee:0f``) is no valid address.

    The two-part forms whose parts start with letters are hex words that C++ names use too
    (``cafe::f16``, ``add::f16``, ``dead::beef``, ``ab::cd``, ``::abs``-style global names). Of
    those, only a first group of a prefix that addresses written this way have is an address
    (:data:`_LETTER_ADDRESS_PREFIX`: ``fd00::beef``, ``fe80::abcd``, ``ff02::fb``, ``fe80::``),
    and not where ``after`` (the character after the candidate) is ``(`` or ``<``: a call or a
    template, C++ syntax. Global addresses (``2000::/3``) start with a digit already.

    Known limits, chosen because a kernel name made wrong is worse than a rare address kept: a
    ``::Y`` form with a letter part (``::beef``: C++'s global scope writes ``::add``) and a first
    group outside those prefixes (``abcd::ef``, the deprecated site-local ``fec0::/10``, a multicast
    group with reserved flags such as ``ffee::1``) stay; a C++ namespace spelled like such a prefix
    and not followed by ``(`` or ``<`` (``fd00::beef``) would go. A broader rule, "every hex part of
    1-4 digits", was rejected: it takes ``add::f16 *`` and ``cafe::f16`` from kernel names.

    Args:
        text: the candidate (:data:`_IPV6`).
        after: the character that follows it in the text ("" at the end).
    """
    try:
        ipaddress.IPv6Address(text)
    except ValueError:
        return False
    address = text.split("%")[0]
    if ":" in address.replace("::", ""):  # a single colon: three groups or more
        return True
    parts = address.split("::")
    if any(part[:1].isdigit() for part in parts):
        return True
    return _LETTER_ADDRESS_PREFIX.fullmatch(parts[0]) is not None and after not in ("(", "<")


def _password_args(program: str, args: Sequence[str]) -> Iterator[tuple[int, int]]:
    """Where a password stands among the words after a program of :data:`_PASSWORD_PROGRAM`.

    Args:
        program: the family of the program (the name of the group that matched): ``mysql``,
            ``sshpass``, ``redis`` or ``mongo``.
        args: the words that follow the program, quotes left on.

    Yields:
        (index of the word, offset of the password in it): 2 for ``-pSECRET``, 3 for mongosh's
        ``-p=SECRET``, 0 for the word after sshpass's ``-p``, redis-cli's ``-a`` or mongosh's ``-p``.
        sshpass's options end at the command it runs (``ssh -p 22``: a port). redis-cli's end at
        the command it sends, but all the words are read: an option of a newer redis-cli that takes
        a value would end the walk early, and a ``-a`` among a command's arguments is rare. It
        takes no ``-a=SECRET``, but a mistyped one still holds the password: it goes too.
    """
    if program == "redis":
        yield from _redis_password_args(args)
        return
    if program == "mongo":
        yield from _mongo_password_args(args)
        return
    sshpass = program == "sshpass"
    take_next = skip_next = False
    for i, word in enumerate(args):
        if take_next:
            yield i, 0
            take_next = False
        elif skip_next:
            skip_next = False
        elif sshpass and (not word.startswith("-") or word == "--"):
            return
        elif word.startswith("-p") and len(word) > 2:
            yield i, 2
        elif sshpass and word == "-p":
            take_next = True
        elif sshpass and word in _SSHPASS_ARG_OPTIONS:
            skip_next = True


def _redis_password_args(args: Sequence[str]) -> Iterator[tuple[int, int]]:
    """:func:`_password_args` for redis-cli: the word after ``-a``/``--pass``, whatever it is."""
    take_next = False
    for i, word in enumerate(args):
        if take_next:
            yield i, 0
            take_next = False
        elif word in _REDIS_PASSWORD_OPTIONS:
            take_next = True
        elif word.startswith(tuple(f"{o}=" for o in _REDIS_PASSWORD_OPTIONS)) and not word.endswith("="):
            yield i, word.index("=") + 1


def _mongo_password_args(args: Sequence[str]) -> Iterator[tuple[int, int]]:
    """:func:`_password_args` for mongosh and the MongoDB tools: ``-p SECRET``, ``-p=SECRET``, ``-pSECRET``.

    A ``-p`` that ends the words or stands before another option asks for the password.
    """
    for i, word in enumerate(args):
        if word == "-p" and i + 1 < len(args) and not args[i + 1].startswith("-"):
            yield i + 1, 0
        elif word.startswith("-p=") and len(word) > 3:
            yield i, 3
        elif word.startswith("-p") and len(word) > 2 and not word.startswith("-p="):
            yield i, 2


def shorten_paths(text: str) -> str:
    """Every absolute path reduced to its last component.

    >>> shorten_paths("run /tmp/rr/bin/llama-bench -m /data/m.gguf (cwd /work/main)")
    'run llama-bench -m m.gguf (cwd main)'
    """
    return _ABS_PATH.sub("", text)


@dataclass
class ScrubReport:
    """What :func:`scrub_capture` did.

    Attributes:
        written: files written under the destination (relative paths).
        dropped: source files left out, relative path -> why (binary report, unknown file, link...).
        rewritten: files whose content the scrub changed (relative paths, as written).
        hosts: host names that were replaced with ``host``.
        removed: counts of removed or rewritten items by kind (``environment variable``,
            ``secret``, ``host name``, ``UUID``, ``table``...).
    """

    written: list[str] = field(default_factory=list)
    dropped: dict[str, str] = field(default_factory=dict)
    rewritten: list[str] = field(default_factory=list)
    hosts: list[str] = field(default_factory=list)
    removed: dict[str, int] = field(default_factory=dict)

    def count(self, kind: str, n: int = 1) -> None:
        """Add ``n`` removed items of ``kind``."""
        if n:
            self.removed[kind] = self.removed.get(kind, 0) + n


class Redactor:
    """The one redaction step every string of a scrubbed capture goes through.

    In order: a NUL-separated environment block keeps only :data:`KEEP_ENV` entries; absolute paths
    are cut to their last part (:func:`shorten_paths`), so that every step below also sees what a
    path leaves (``/home/a/proj/token=ghp_...`` -> ``token=<redacted>``); ``NAME=value``
    pairs with an environment-style or secret-looking name lose their value (the kept variables
    excepted); ``--flag value`` pairs whose flag names a secret lose the value, as do
    ``Authorization:``/``password:``-style fields and ``Bearer`` tokens, and the password of a
    mysql-like (``-pSECRET``), ``sshpass`` (``-p SECRET``), redis-cli (``-a SECRET``) or mongosh
    (``-p SECRET``) command (:data:`_PASSWORD_PROGRAM`); a URL's user goes; e-mail
    addresses, UUIDs, IPv6 and IPv4 addresses are replaced; host names (those of
    :data:`SHORT_HOST` characters or more; a full name's first label too) become ``host`` and user
    names ``user``.
    """

    def __init__(self, report: ScrubReport, hosts: Iterable[str] = (), users: Iterable[str] = ()) -> None:
        self.report = report
        names = set()
        for h in hosts:
            h = h.strip()
            if h and h not in ("host", "localhost"):
                names.add(h)
                if "." in h and len(h.split(".")[0]) >= SHORT_HOST:
                    names.add(h.split(".")[0])  # the short name of a full one
        self.hosts = sorted(names, key=len, reverse=True)
        long = [h for h in self.hosts if len(h) >= SHORT_HOST]
        self._host_re = re.compile("|".join(rf"(?<![\w.-]){re.escape(h)}(?![\w-])" for h in long)) if long else None
        who = sorted({u for u in users if len(u) >= 3 and u not in ("user", "host", "root")}, key=len, reverse=True)
        self._user_re = re.compile("|".join(rf"(?<![\w.-]){re.escape(u)}(?![\w-])" for u in who)) if who else None

    def _sub(self, pattern: re.Pattern[str], text: str, repl: str | Callable[[re.Match[str]], str], kind: str) -> str:
        out, n = pattern.subn(repl, text)
        self.report.count(kind, n)
        return out

    def __call__(self, text: str) -> str:
        """``text`` without secrets, identifiers, host and user names, or directories."""
        if "\x00" in text and _ENV_ENTRY.match(text):  # a process environment block
            entries = text.split("\x00")
            kept = [e for e in entries if not e or KEEP_ENV.match(e)]
            self.report.count("environment variable", len(entries) - len(kept))
            text = "\x00".join(kept)

        # paths first: what the shortening leaves (``/home/a/proj/token=...`` -> ``token=...``) is
        # redacted like any other text, and a path's directories go before they can hide a secret's start
        text = shorten_paths(text)

        def assignment(m: re.Match[str]) -> str:
            name = m.group(1) or m.group(2)
            if KEEP_ENV.match(name) or m.group(3) == REDACTED:
                return m.group(0)
            self.report.count("secret or environment value")
            return f"{name}={REDACTED}"

        text = _ASSIGNMENT.sub(assignment, text)
        text = self._sub(_SECRET_FLAG, text, lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", "secret flag value")
        text = self._sub(
            _SECRET_FIELD,
            text,
            lambda m: f"{m.group(1) or m.group(3)}{m.group(2) or m.group(4)}{REDACTED}",
            "secret field value",
        )
        text = self._sub(_BEARER, text, lambda m: f"{m.group(1)} {REDACTED}", "bearer token")
        text = self._program_passwords(text)
        text = self._sub(_URL_USER, text, lambda m: f"{m.group(1)}user@", "user of a URL")
        text = self._sub(_EMAIL, text, "<email>", "e-mail address")
        text = self._sub(_UUID, text, "<uuid>", "UUID")
        text = self._ipv6(text)
        text = self._sub(_IPV4, text, "<ip>", "IP address")
        text = self._sub(_MAC, text, "<mac>", "MAC address")
        text = self._sub(_KNOWN_TOKEN, text, REDACTED, "token")
        if self._host_re is not None:
            text = self._sub(self._host_re, text, "host", "host name")
        if self._user_re is not None:
            text = self._sub(self._user_re, text, "user", "user name")
        return text

    def _ipv6(self, text: str) -> str:
        """``text`` with each IPv6 address (:data:`_IPV6`, checked by :func:`_is_ipv6`) replaced by ``<ip>``."""

        def repl(m: re.Match[str]) -> str:
            if not _is_ipv6(m.group(0), m.string[m.end() : m.end() + 1]):
                return m.group(0)
            self.report.count("IP address")
            return "<ip>"

        return _IPV6.sub(repl, text)

    def _program_passwords(self, text: str) -> str:
        """``text`` with the password of each :data:`_PASSWORD_PROGRAM` command redacted (:func:`_password_args`)."""
        cuts: list[tuple[int, int]] = []  # (start, end) of each password in text
        for m in _PASSWORD_PROGRAM.finditer(text):
            spans: list[tuple[int, int]] = []
            pos = m.end()
            while (w := _SHELL_WORD.match(text, pos)) is not None:
                spans.append(w.span(1))
                pos = w.end()
            words = [text[a:b] for a, b in spans]
            for i, offset in _password_args(str(m.lastgroup), words):
                if words[i][offset:] != REDACTED:
                    cuts.append((spans[i][0] + offset, spans[i][1]))
        for start, end in sorted(set(cuts), reverse=True):
            text = text[:start] + REDACTED + text[end:]
            self.report.count("secret flag value")
        return text

    def argv(self, items: list[Any]) -> list[Any]:
        """A command line as a list: the value after a secret flag redacted, every item redacted.

        The password after a program of :data:`_PASSWORD_PROGRAM` (:func:`_password_args`) goes too.
        """
        out: list[Any] = []
        hidden: dict[int, int] = {}  # item -> offset of the password in it (mysql -pSECRET, redis-cli -a SECRET)
        for n, item in enumerate(items):
            if isinstance(item, str) and (m := _PASSWORD_PROGRAM.fullmatch(item.rsplit("/", 1)[-1])) is not None:
                rest = items[n + 1 :]
                words = [w if isinstance(w, str) else "" for w in rest]  # a number is no option
                hidden.update((n + 1 + i, offset) for i, offset in _password_args(str(m.lastgroup), words))
        hide_next = False
        for n, item in enumerate(items):
            if n in hidden and item != REDACTED and (not isinstance(item, str) or item[hidden[n] :] != REDACTED):
                out.append(item[: hidden[n]] + REDACTED if isinstance(item, str) else REDACTED)
                self.report.count("secret flag value")
                hide_next = False
                continue
            if hide_next and isinstance(item, str):
                out.append(REDACTED)
                self.report.count("secret flag value")
                hide_next = False
                continue
            hide_next = isinstance(item, str) and (
                re.fullmatch(rf"--?(?i:{_SECRET_NAME})", item) is not None or item in _SHORT_SECRET_FLAGS
            )
            out.append(self(item) if isinstance(item, str) else item)
        return out


# ---- what is kept ---------------------------------------------------------------------------------

#: rocprofv3 CSV domains kept: what rocroof reads, and the other timelines.
_ROCPROFV3_TRACES = re.compile(
    r"^(?:.*_)?(?:kernel_trace|counter_collection|marker_api_trace|hip_api_trace|hsa_api_trace|memory_copy_trace|"
    r"memory_allocation_trace|scratch_memory_trace|agent_info)\.csv$"
)
#: rocprofiler-compute workload CSVs kept.
_WORKLOAD_CSV = re.compile(r"^(?:pmc_perf(?:_\d+)?|SQ_\w+|timestamps|sysinfo|roofline|pmc_dispatch_info)\.csv$")
#: Text files kept (redacted): logs, roctx traces, rocminfo output, counter lists, configs.
_TEXT_FILES = re.compile(r"(?:\.log|\.txt|\.ya?ml|^cmd)$")

#: Kept tables per SQLite family (suffix-insensitive names: rocpd tables carry a UUID).
NSYS_TABLES = frozenset(
    {
        "CUPTI_ACTIVITY_KIND_KERNEL",
        "CUPTI_ACTIVITY_KIND_RUNTIME",
        "CUPTI_ACTIVITY_KIND_MEMCPY",
        "CUPTI_ACTIVITY_KIND_MEMSET",
        "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
        "CUPTI_ACTIVITY_KIND_GRAPH_TRACE",
        "NVTX_EVENTS",
        "StringIds",
        "PROCESSES",
        "ThreadNames",
        "TARGET_INFO_GPU",
        "TARGET_INFO_CUDA_DEVICE",
        "TARGET_INFO_CUDA_STREAM",
        "TARGET_INFO_CUDA_CONTEXT_INFO",
        "TARGET_INFO_SESSION_START_TIME",
    }
)
ROCPD_TABLES = frozenset(
    {
        "rocpd_kernel_dispatch",
        "rocpd_event",
        "rocpd_pmc_event",
        "rocpd_info_pmc",
        "rocpd_region",
        "rocpd_sample",
        "rocpd_string",
        "rocpd_info_kernel_symbol",
        "rocpd_info_agent",
        "rocpd_track",
        "rocpd_timestamp",  # schema 4.0: times by id (tests/rocpd_builder.py RocpdV4Builder)
        "rocpd_info_category",  # schema 4.0: event categories
        "rocpd_metadata",
        "rocpd_info_process",
        "rocpd_info_node",
        "rocpd_info_thread",
        "rocpd_info_queue",
        "rocpd_info_stream",
        "rocpd_memory_copy",
        "rocpd_memory_allocate",
        "rocpd_info_code_object",
    }
)
RPD_TABLES = frozenset(
    {
        "rocpd_op",
        "rocpd_api",
        "rocpd_api_ops",
        "rocpd_string",
        "rocpd_ustring",
        "rocpd_kernelapi",
        "rocpd_copyapi",
        "rocpd_kernelop",
        "rocpd_copyop",
        "rocpd_metadata",
        "rocpd_counter",
    }
)
LEGACY_TABLES = frozenset({"KERN", "A", "rocTX", "HIP", "HSA", "COPY", "OPS"})
#: Columns emptied, per logical table: identifiers of machines and devices.
_BLANK = {
    "TARGET_INFO_GPU": ("uuid", "busLocation", "luid"),
    "rocpd_info_node": ("machine_id", "domain_name"),
    "rocpd_info_agent": ("uuid",),
}
#: Host-name columns, set to ``host``.
_HOST_COLUMNS = {"rocpd_info_node": ("hostname",)}
#: Environment columns (JSON objects or NUL blocks), filtered to :data:`KEEP_ENV`.
_ENV_COLUMNS = {"rocpd_info_process": ("environment",)}
#: Nsight Systems columns that hold ``StringIds`` ids: the strings kept.
_NSYS_STRING_REFS = {
    "CUPTI_ACTIVITY_KIND_KERNEL": ("shortName", "demangledName", "mangledName"),
    "CUPTI_ACTIVITY_KIND_RUNTIME": ("nameId",),
    "NVTX_EVENTS": ("textId", "domainId", "categoryId"),
    "ThreadNames": ("nameId",),
    "PROCESSES": ("nameId",),
}
#: Columns that hold a run's random id (rocpd's ``guid``): kept as they are.
_RUN_IDS = frozenset({"guid"})
#: ``agent_info.csv`` columns that identify a device or machine, emptied.
_AGENT_ID_COLUMNS = ("Location_Id", "Domain", "Hive_Id", "Gpu_Id", "Uuid", "Serial")
#: CSV columns that hold the host name, replaced with ``host``.
_CSV_HOST_COLUMNS = ("Host Name", "hostname", "host_name")
#: The compressible kinds (``--gzip``).
_COMPRESSIBLE = (".sqlite", ".db", ".rpd", ".csv", ".json")


def _logical_table(name: str) -> str:
    """``rocpd_x_<uuid>`` -> ``rocpd_x``; other names unchanged (rocpd's physical tables carry a UUID)."""
    m = re.search(r"_[0-9A-Fa-f]{8}_[0-9A-Fa-f]{4}_[0-9A-Fa-f]{4}_[0-9A-Fa-f]{4}_[0-9A-Fa-f]{12}$", name)
    return name[: m.start()] if m else name


def _sqlite_family(tables: set[str]) -> tuple[str, frozenset[str]] | None:
    logical = {_logical_table(t) for t in tables}
    if "CUPTI_ACTIVITY_KIND_KERNEL" in logical:
        return "Nsight Systems export", NSYS_TABLES
    if "rocpd_kernel_dispatch" in logical:
        return "rocpd database", ROCPD_TABLES
    if "rocpd_op" in logical and "rocpd_api" in logical:
        return "RPD trace", RPD_TABLES
    if logical & {"KERN", "A", "rocTX"}:
        return "rocprof results database", LEGACY_TABLES
    return None


def _kind(path: Path) -> tuple[str | None, str]:
    """``(handler, what)`` for a file, or ``(None, why it is left out)``."""
    name = logical_name(path)
    if name.endswith(BINARY_REPORTS):
        return None, "binary report (its exports are kept)"
    if is_gzip(path):
        with open_binary(path) as fh:  # damaged compression is an error, not a file to leave out
            fh.read(1 << 16)
    if name.endswith((".sqlite", ".db", ".rpd", ".sqlite3")):
        return "sqlite", "SQLite"
    if name.endswith(".csv"):
        if (
            _ROCPROFV3_TRACES.match(name)
            or rocprofv3_csv.classify(path)
            or _WORKLOAD_CSV.match(name)
            or rocprof_legacy.csv_generation(path)
            or nvidia.is_ncu_csv(path)
        ):
            return "csv", "profiler CSV"
        return None, "a CSV file rocroof does not read"
    if name.endswith(".json"):
        if name == MANIFEST:
            return "manifest", "manifest"
        if name in (SIDECAR_NAME, BANDWIDTH_FILE) or ggml_meta.looks_like_metadata(path):
            return "json", "op metadata or probe result"
        return None, "a JSON file rocroof does not read"
    if _TEXT_FILES.search(name):
        return "text", "text"
    return None, "a file rocroof does not read"


def scrub_capture(src: Path, dst: Path, *, compress: bool = False, extra_hosts: Iterable[str] = ()) -> ScrubReport:
    """Copy the capture directory ``src`` to ``dst``, keeping measurements and nothing that identifies.

    Args:
        src: a capture directory (rocroof collect output, rocprofv3 / rocpd / rocprof-compute /
            legacy rocprof / RPD / Nsight output), or a capture that is one file (an RPD or rocpd
            database, an Nsight Systems SQLite export, plain or gzip): ``dst`` then holds its
            scrubbed copy under the same name.
        dst: the destination; must not exist or be empty.
        compress: gzip ``.sqlite``, ``.db``, ``.rpd``, ``.csv`` and ``.json`` files
            (``name.ext.gz``), all but the ``rocroof-collect.json`` manifest.
        extra_hosts: more host names to replace.

    Returns:
        A :class:`ScrubReport`.

    Raises:
        InputError: ``src`` is neither a directory nor a file, ``dst`` is not empty or lies inside
            ``src``, a one-file capture is of no kind scrub keeps, a directory holds no profiler
            output (empty, or only files rocroof does not read and logs; nothing is written), or a
            kept file cannot be read as its type (an SQLite file that is no database, a CSV file
            that is no CSV, invalid JSON, damaged gzip). A log, CSV or JSON file that is not UTF-8
            text (binary data, another encoding) is left out and listed in ``dropped`` instead.
    """
    single = src.is_file() and not src.is_symlink()
    if not src.is_dir() and not single:
        what = "a symbolic link (scrub never follows one: give its target)" if src.is_symlink() else "no such file"
        raise InputError(f"{src}: {what}; expected a capture directory or a one-file capture")
    if dst.exists() and (not dst.is_dir() or any(dst.iterdir())):
        raise InputError(f"{dst}: destination exists and is not an empty directory")
    if dst.resolve().is_relative_to(src.resolve()):
        raise InputError(f"{dst}: destination lies inside the capture {src}")
    report = ScrubReport()
    files: list[Path] = []
    if single:
        kind, why = _kind(src)
        if kind != "sqlite":  # a CSV, a manifest, a log: one part of a capture directory
            what = why if kind is None else f"a {why} file, one part of a capture"
            raise InputError(
                f"{src}: {what}; scrub takes a capture directory, or a capture that is one file (an RPD, rocpd "
                "or Nsight Systems SQLite file)"
            )
        files.append(src)
        src = src.parent  # the file's name is kept, relative to its folder
    for folder, dirs, names in os.walk(src, followlinks=False) if not single else ():
        here = Path(folder)
        for d in sorted(dirs):
            if (here / d).is_symlink():  # os.walk lists a link to a directory without following it
                report.dropped[str((here / d).relative_to(src))] = "symbolic link (never followed)"
        for n in sorted(names):
            f = here / n
            if f.is_symlink():
                report.dropped[str(f.relative_to(src))] = "symbolic link (never followed)"
            elif f.is_file():
                files.append(f)
    files.sort()
    redact = Redactor(report, [socket.gethostname(), *extra_hosts, *_learn_hosts(files)], users=_learn_users(files))
    report.hosts = redact.hosts
    try:  # write into a temporary sibling, then rename: a failed scrub leaves nothing behind
        dst.parent.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=f".{dst.name}.", dir=dst.parent))
    except OSError as exc:
        raise InputError(f"{dst}: cannot create the destination ({exc.strerror})") from exc
    try:
        measured = False  # a file of profiler output kept: logs alone are no capture
        not_text: list[str] = []  # files of a text kind that hold binary data: left out
        for path in files:
            rel = path.relative_to(src)
            out = work / rel
            try:
                handler, why = _kind(path)
                if handler is None:
                    report.dropped[str(rel)] = why
                    continue
                out.parent.mkdir(parents=True, exist_ok=True)
                changed = _scrub_file(handler, path, out, redact, report)
            except _NotText as exc:  # binary where text is expected: never copied as it is
                out.unlink(missing_ok=True)
                report.dropped[str(rel)] = str(exc)
                not_text.append(str(rel))
                continue
            except (EOFError, zlib.error, gzip.BadGzipFile) as exc:  # a gzip file cut short or damaged
                raise InputError(f"{path}: compressed data is damaged or truncated ({exc})") from exc
            except OSError as exc:  # reading the source: name it, not the destination
                raise InputError(f"{exc.filename or path}: cannot read ({exc.strerror or exc})") from exc
            if changed is None:  # an SQLite file of no family rocroof reads
                out.unlink(missing_ok=True)
                report.dropped[str(rel)] = "an SQLite database rocroof does not read"
                continue
            if compress and not out.name.endswith(".gz") and out.suffix in _COMPRESSIBLE and out.name != MANIFEST:
                packed = out.with_name(out.name + ".gz")
                with open(out, "rb") as fh, gzip.GzipFile(packed, "wb", mtime=0) as gz:
                    shutil.copyfileobj(fh, gz)
                out.unlink()
                out = packed
            report.written.append(str(out.relative_to(work)))
            measured = measured or handler != "text"
            if changed:
                report.rewritten.append(str(out.relative_to(work)))
        if not measured:
            what = f"none of its {len(files)} file(s) is one rocroof reads" if files else "the directory is empty"
            binary = [f"{name}: {report.dropped[name]}" for name in not_text]
            if binary:
                what += f"; left out {binary[0]}" + (f" and {len(binary) - 1} more" if len(binary) > 1 else "")
            raise InputError(
                f"{src}: no profiler output to scrub ({what}); expected a capture directory (rocroof collect, "
                "rocprofv3, rocpd, rocprofiler-compute, rocprof, RPD or Nsight output)"
            )
        if dst.exists():
            dst.rmdir()  # checked empty above
        work.rename(dst)
    except OSError as exc:
        shutil.rmtree(work, ignore_errors=True)
        raise InputError(f"{exc.filename or dst}: cannot read or write ({exc.strerror or exc})") from exc
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return report


#: What reading a file to learn names from may raise; the file's own scrub step reports it.
_UNREADABLE = (
    OSError,
    EOFError,
    zlib.error,
    UnicodeDecodeError,
    json.JSONDecodeError,
    sqlite3.DatabaseError,
    ParseError,
    csv.Error,
    RecursionError,
)


def _safe_user() -> bool:
    try:
        return bool(getpass.getuser())
    except (KeyError, OSError):
        return False


def _learn_users(files: list[Path]) -> set[str]:
    """User names: the local one, those nsys recorded (``*USER_NAME``), and home directories in paths."""
    users = {getpass.getuser()} if _safe_user() else set()
    users.update(m.group(1) for m in _HOME.finditer(str(Path.home())))
    for f in files:
        name = logical_name(f)
        try:
            if name.endswith((".sqlite", ".db")):
                with sqlite_file(f) as plain, closing(sqlite_connect(plain)) as con:
                    if "META_DATA_CAPTURE" in (sqlite_tables(plain) or set()):
                        users.update(
                            str(r[0])
                            for r in con.execute("SELECT value FROM META_DATA_CAPTURE WHERE name LIKE '%USER_NAME'")
                            if r[0]
                        )
            elif name.endswith((".log", ".json", ".txt", ".csv", ".yaml", ".yml")) or name == "cmd":
                with open_binary(f) as fh:
                    head = fh.read(4 << 20).decode("utf-8", errors="replace")
                users.update(m.group(1) for m in _HOME.finditer(head))
        except _UNREADABLE:
            continue
    return users


def _learn_hosts(files: list[Path]) -> set[str]:
    """Host names the capture records (ncu ``Host Name``, sysinfo ``hostname``, manifest, nsys, rocpd)."""
    hosts: set[str] = set()
    for f in files:
        name = logical_name(f)
        try:
            if name.endswith(".csv"):
                csv.field_size_limit(max(csv.field_size_limit(), MAX_LINE_BYTES))
                with open_binary(f) as fh:
                    reader = csv.reader(io.TextIOWrapper(fh, encoding="utf-8", errors="replace"))
                    header = next(reader, [])
                    cols = [i for i, h in enumerate(header) if h in _CSV_HOST_COLUMNS]
                    for row in reader:
                        hosts.update(row[i] for i in cols if i < len(row) and row[i])
            elif name == MANIFEST:
                data = json.loads(f.read_text(encoding="utf-8"))
                if isinstance(data, dict) and isinstance(data.get("host"), str):
                    hosts.add(data["host"])
            elif name.endswith((".sqlite", ".db")):
                with sqlite_file(f) as plain, closing(sqlite_connect(plain)) as con:
                    tables = sqlite_tables(plain) or set()
                    if "TARGET_INFO_SYSTEM_ENV" in tables:
                        hosts.update(
                            r[0] for r in con.execute("SELECT value FROM TARGET_INFO_SYSTEM_ENV WHERE name='Hostname'")
                        )
                    if "META_DATA_EXPORT" in tables:
                        hosts.update(
                            r[0] for r in con.execute("SELECT value FROM META_DATA_EXPORT WHERE name='EXPORT_HOST'")
                        )
                    for t in tables:
                        if _logical_table(t) == "rocpd_info_node":
                            hosts.update(r[0] for r in con.execute(f'SELECT hostname FROM "{t}"'))
        except _UNREADABLE:
            continue  # the file's own scrub step reports what it cannot read
    return {str(h).strip() for h in hosts if h and str(h).strip()}


def _scrub_file(handler: str, path: Path, out: Path, redact: Redactor, report: ScrubReport) -> bool | None:
    """Write the scrubbed ``path`` to ``out``; True when its content changed, None when it is dropped."""
    if handler == "sqlite":
        return _scrub_sqlite(path, out, redact, report)
    if handler == "csv":
        return _rewrite_text(path, out, lambda text: _scrub_csv(path, text, redact, report))
    if handler == "manifest":
        return _rewrite_text(path, out, lambda text: _scrub_json(path, text, redact, manifest=True))
    if handler == "json":
        return _rewrite_text(path, out, lambda text: _scrub_json(path, text, redact, manifest=False))
    return _rewrite_text(path, out, redact)


class _NotText(Exception):
    """A file kept as text (a log, CSV or JSON) that is not UTF-8 text; the message says why it is left out."""


def _text_of(data: bytes) -> str:
    """``data`` as UTF-8 text.

    Raises:
        _NotText: a NUL byte (binary data, or UTF-16 text) or bytes that are not UTF-8: the redactor
            could not see a secret in it, so the file is left out rather than copied as it is.
    """
    if b"\x00" in data:
        raise _NotText(f"binary data (a NUL byte at offset {data.index(0)}), not UTF-8 text: scrub cannot check it")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _NotText(
            f"not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}): scrub cannot check it"
        ) from exc


def _rewrite_text(path: Path, out: Path, fn: Callable[[str], str]) -> bool:
    with open_binary(path) as fh:
        text = _text_of(fh.read())
    cleaned = fn(text)
    data = cleaned.encode("utf-8")
    if is_gzip(path):
        with gzip.GzipFile(out, "wb", mtime=0) as gz:
            gz.write(data)
    else:
        out.write_bytes(data)
    return cleaned != text


def _scrub_csv(path: Path, text: str, redact: Redactor, report: ScrubReport) -> str:
    csv.field_size_limit(max(csv.field_size_limit(), MAX_LINE_BYTES))  # the readers' own bound on a row
    try:
        rows = list(csv.reader(io.StringIO(text, newline="")))
    except csv.Error as exc:
        raise InputError(f"{path}: not a CSV file rocroof can scrub ({exc})") from exc
    if not rows:
        return text
    header = rows[0]
    hosts = {i for i, h in enumerate(header) if h.strip() in _CSV_HOST_COLUMNS}
    blank = {i for i, h in enumerate(header) if h.strip() in _AGENT_ID_COLUMNS} if "agent_info" in path.name else set()
    changed = False
    for r, row in enumerate(rows):
        for i, cell in enumerate(row):
            if r and i in hosts and cell and cell != "host":
                new = "host"
                report.count("host name")
            elif r and i in blank and cell:
                new = ""
                report.count("device identifier")
            else:
                new = redact(cell)
            if new != cell:
                row[i] = new
                changed = True
    if not changed:
        return text
    buf = io.StringIO()
    if text.startswith('"'):  # keep the source's quoting (ncu and rocprofv3 quote their headers)
        csv.writer(buf, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rows)
    else:
        csv.writer(buf, quoting=csv.QUOTE_MINIMAL, lineterminator="\n").writerows(rows)
    return buf.getvalue()


def _scrub_json(path: Path, text: str, redact: Redactor, *, manifest: bool) -> str:
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise InputError(f"{path}: invalid JSON; cannot scrub it") from exc

    def walk(obj: Any, key: str = "") -> Any:
        if isinstance(obj, dict):
            out = {}
            for k, v in obj.items():
                if key == "env" and not KEEP_ENV.match(str(k)):
                    redact.report.count("environment variable")
                    continue
                # a key is text like any other (a model path, a host name as a key): redacted, and
                # numbered where two keys redact alike (` <2>`, as rocpd's unique strings are)
                name = redact(k) if isinstance(k, str) else k
                if name != k:
                    base, n = name, 2
                    while name in out or name in obj:
                        name, n = f"{base} <{n}>", n + 1
                out[name] = walk(v, str(k))
            return out
        if isinstance(obj, list):
            return redact.argv(obj) if manifest and key in ("command", "argv") else [walk(v, key) for v in obj]
        if isinstance(obj, str):
            if _SECRET_KEY.fullmatch(key) and obj:
                redact.report.count("secret field value")
                return REDACTED
            return "host" if manifest and key == "host" else redact(obj)
        if isinstance(obj, int | float) and not isinstance(obj, bool) and _PASSWORD_KEY.fullmatch(key):
            redact.report.count("secret field value")
            return REDACTED
        return obj

    try:
        scrubbed = walk(data)
    except RecursionError as exc:
        raise InputError(f"{path}: JSON nested too deeply; cannot scrub it") from exc
    if scrubbed == data:
        return text
    return json.dumps(scrubbed, indent=None if "\n" not in text.strip() else 2) + "\n"


def _scrub_sqlite(path: Path, out: Path, redact: Redactor, report: ScrubReport) -> bool | None:
    """Copy an SQLite file keeping its family's tables, identifiers emptied, strings redacted.

    Returns:
        True (the copy is rewritten), or None when the file is no SQLite family rocroof reads.
    """
    with sqlite_file(path) as plain_src:
        tables = sqlite_tables(plain_src)
        if tables is None:
            raise InputError(f"{path}: not a readable SQLite database; cannot scrub it")
        family = _sqlite_family(tables)
        if family is None:
            return None
        plain = out.with_name(logical_name(path)) if is_gzip(path) else out
        shutil.copyfile(plain_src, plain)
    _, keep = family
    try:
        con = sqlite3.connect(plain)
        try:
            con.create_function("rr_clean", 1, lambda v: _clean_cell(v, redact))
            con.create_function("rr_env", 1, lambda v: _filter_env(v, report) if isinstance(v, str) else v)
            objects = con.execute(
                "SELECT name, type, sql FROM sqlite_master WHERE type IN ('table', 'view')"
            ).fetchall()
            internal = ("sqlite_sequence",)
            dropped = [n for n, t, _ in objects if t == "table" and _logical_table(n) not in keep and n not in internal]
            for name, kind, sql in objects:  # views first: they may read a table about to go
                if kind == "view" and (any(re.search(rf"\b{re.escape(d)}\b", sql or "") for d in dropped)):
                    con.execute(f'DROP VIEW "{name}"')
            for name in dropped:
                con.execute(f'DROP TABLE "{name}"')
                report.count("table")
            kept = [n for n, t, _ in objects if t == "table" and n not in dropped and n not in internal]
            if "StringIds" in kept:
                _prune_nsys_strings(con, report)
            if "PROCESSES" in kept and "CUPTI_ACTIVITY_KIND_RUNTIME" in kept:
                # the recording host's process list: keep the processes that called CUDA
                report.count(
                    "host process record",
                    con.execute(
                        "DELETE FROM PROCESSES WHERE globalPid NOT IN "
                        "(SELECT DISTINCT globalTid - (globalTid % 16777216) FROM CUPTI_ACTIVITY_KIND_RUNTIME)"
                    ).rowcount,
                )
            for table in kept:
                cols = {r[1]: (r[2] or "").upper() for r in con.execute(f'PRAGMA table_info("{table}")')}
                logical = _logical_table(table)
                for col in _BLANK.get(logical, ()):
                    if col in cols:
                        value = "NULL" if "INT" in cols[col] else "''"
                        n = con.execute(f'UPDATE "{table}" SET "{col}" = {value} WHERE "{col}" IS NOT NULL').rowcount
                        report.count("device or machine identifier", n)
                for col in _HOST_COLUMNS.get(logical, ()):
                    if col in cols:
                        n = con.execute(f'UPDATE "{table}" SET "{col}" = \'host\' WHERE "{col}" != \'host\'').rowcount
                        report.count("host name", n)
                for col in _ENV_COLUMNS.get(logical, ()):
                    if col in cols:
                        con.execute(f'UPDATE "{table}" SET "{col}" = rr_env("{col}")')
                numeric = [
                    c
                    for c, t in cols.items()
                    if ("INT" in t or "REAL" in t or "FLOA" in t or "DOUB" in t) and c not in _RUN_IDS
                ]
                if numeric:  # SQLite keeps text that is no number as text in a numeric column: one pass for them
                    is_text = {c: f"typeof(\"{c}\") IN ('text', 'blob')" for c in numeric}
                    sets = ", ".join(
                        f'"{c}" = CASE WHEN {is_text[c]} THEN rr_clean("{c}") ELSE "{c}" END' for c in numeric
                    )
                    con.execute(f'UPDATE "{table}" SET {sets} WHERE {" OR ".join(is_text.values())}')
                for col in cols:
                    if col in numeric or col in _RUN_IDS:
                        continue
                    # rocpd names a run by a random UUID (guid, metadata uuid): not an identifier of anyone, and
                    # the key that joins its tables
                    keep_ids = " AND tag NOT IN ('uuid', 'guid')" if logical == "rocpd_metadata" else ""
                    where = f"typeof(\"{col}\") IN ('text', 'blob'){keep_ids}"
                    counts = dict(report.removed)
                    try:
                        con.execute(f'UPDATE "{table}" SET "{col}" = rr_clean("{col}") WHERE {where}')
                    except sqlite3.IntegrityError:  # a UNIQUE column whose values redact alike
                        report.removed = counts  # the statement was undone: count its redactions once
                        _clean_unique(con, table, col, where, redact, report)
            con.commit()
            con.execute("VACUUM")  # deleted rows must not survive in free pages
        finally:
            con.close()
    except sqlite3.DatabaseError as exc:
        raise InputError(f"{path}: not a readable SQLite database ({exc}); cannot scrub it") from exc
    if plain != out:  # the source was gzip: keep it compressed
        with open(plain, "rb") as raw, gzip.GzipFile(out, "wb", mtime=0) as gz:
            shutil.copyfileobj(raw, gz)
        plain.unlink()
    return True


#: What a value that redacts like another of a UNIQUE column gets appended (the ``n``-th alike, from 2).
_ALIKE = " <{n}>"


def _clean_unique(
    con: sqlite3.Connection, table: str, col: str, where: str, redact: Redactor, report: ScrubReport
) -> None:
    """Redact ``col`` of ``table`` where two values become alike and the column is UNIQUE.

    rocpd keeps each string once (``rocpd_string.string ... UNIQUE``, rocprofiler-sdk's rocpd
    schema), and other tables point at it by id: two messages that differ only in a path's folders
    or a token (``load /home/a/x.gguf``, ``load /home/b/x.gguf``) redact alike, and one UPDATE fails.
    Each such value after the first gets :data:`_ALIKE` (``load x.gguf <2>``), so every row keeps its
    id and the strings stay apart. Rows are first given temporary values of their own, then their
    final ones, so that no step meets a value the UPDATE has not reached yet.

    Raises:
        sqlite3.DatabaseError: the table has no rowid (no rocroof-read format has such a table).
    """
    rows = con.execute(f'SELECT rowid, "{col}" FROM "{table}" WHERE {where}').fetchall()
    final: list[tuple[object, int]] = []
    used: set[object] = {
        v for (v,) in con.execute(f'SELECT "{col}" FROM "{table}" WHERE NOT ({where}) AND "{col}" IS NOT NULL')
    }
    alike = 0
    for rowid, value in rows:
        clean: object = _clean_cell(value, redact)
        if clean in used:
            n = 2
            while (candidate := _with_alike(clean, n)) in used:
                n += 1
            clean, alike = candidate, alike + 1
        used.add(clean)
        final.append((clean, rowid))
    con.executemany(
        f'UPDATE "{table}" SET "{col}" = ? WHERE rowid = ?', [(f"\x00rocroof-scrub-{r}", r) for _, r in final]
    )
    con.executemany(f'UPDATE "{table}" SET "{col}" = ? WHERE rowid = ?', final)
    report.count("value told apart after redaction (<n> appended)", alike)


def _with_alike(value: object, n: int) -> object:
    """``value`` with :data:`_ALIKE` appended (text, or the bytes of a BLOB)."""
    suffix = _ALIKE.format(n=n)
    return value + suffix.encode() if isinstance(value, bytes) else f"{value}{suffix}"


def _clean_cell(value: str | bytes | int | float | None, redact: Redactor) -> str | bytes | int | float | None:
    """An SQLite cell redacted: text, and a BLOB that holds UTF-8 text (kept a BLOB); other values as they are."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, bytes):
        try:
            text = value.decode("utf-8")
        except UnicodeDecodeError:
            return value
        return redact(text).encode("utf-8")
    return value


def _filter_env(value: str, report: ScrubReport) -> str:
    """An environment as rocpd stores it (a JSON object) or a NUL block, with only :data:`KEEP_ENV` entries."""
    try:
        env = json.loads(value)
    except (json.JSONDecodeError, RecursionError):
        env = None
    if isinstance(env, dict):
        kept = {k: v for k, v in env.items() if KEEP_ENV.match(str(k))}
        report.count("environment variable", len(env) - len(kept))
        return json.dumps(kept)
    if isinstance(env, list):  # ["NAME=value", ...]
        kept_list = [e for e in env if isinstance(e, str) and KEEP_ENV.match(e)]
        report.count("environment variable", len(env) - len(kept_list))
        return json.dumps(kept_list)
    entries = value.replace("\x00", "\n").splitlines()
    kept_entries = [e for e in entries if KEEP_ENV.match(e)]
    report.count("environment variable", len(entries) - len(kept_entries))
    return "\n".join(kept_entries)


def _prune_nsys_strings(con: sqlite3.Connection, report: ScrubReport) -> None:
    """Keep the ``StringIds`` rows the kept tables name; the others (the application's output...) go."""
    refs: list[str] = []
    for table, cols in _NSYS_STRING_REFS.items():
        if con.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (table,)).fetchone() is None:
            continue
        have = {r[1] for r in con.execute(f'PRAGMA table_info("{table}")')}
        # NULLs left out: "id NOT IN (..., NULL)" is never true, and would keep every string
        refs += [f'SELECT "{c}" FROM "{table}" WHERE "{c}" IS NOT NULL' for c in cols if c in have]
    if not refs:
        n = con.execute("DELETE FROM StringIds").rowcount
    else:
        n = con.execute(f"DELETE FROM StringIds WHERE id NOT IN ({' UNION '.join(refs)})").rowcount
    report.count("string not named by a kept table", n)
