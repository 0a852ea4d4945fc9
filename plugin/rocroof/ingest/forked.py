"""Windows built in a second process while the store writes the ones before (issue 15).

A windowed ingest spends its time in two loops that each hold Python's GIL: building a window
(``build_run`` over the window's rows, pandas) and binding its rows' values to SQLite's
statements (the store). A thread beside the store gains nothing (measured: the GIL is held by
both but for SQLite's own step), so :func:`built_in_child` runs the window generator in a forked
child process: the child builds window k+1 while the parent writes window k. On the 2-core
machine of ``benchmarks/RESULTS.md`` that takes the build off the ingest's critical path.

**What crosses the pipe.** Each window goes as one message: a pickle (protocol 5) whose numpy
buffers travel out of band, written to the pipe as they are (no copy into the pickle). A large
text ``pd.Index`` (the categories of a pass-wide categorical: every marker message of the pass)
is sent once, the first time a window refers to it, and later windows refer to it by key. Text
is best sent so, as codes: every string a window sends is a new Python object in the parent, and
strings that live through a window's write pin pymalloc's arenas (the parent grew 3.5 MB per
window when the marker messages crossed as strings; flat as codes, or under
``PYTHONMALLOC=malloc``). When the generator is exhausted the child sends what the generator
filled in on ``frames`` as it ended (``run``, ``notes``, the ``pass`` rows) and exits; the
parent copies them into its own ``frames``. An exception in the child crosses as itself where it pickles (every
:class:`~rocroof.errors.RocroofError` does; :class:`~rocroof.ingest.windows.WindowsDisagree`
too), else as a :class:`WindowBuilderError` naming it.

**Lifetimes.** The child never returns from the fork: it leaves with ``os._exit`` (no atexit
handler, no finalizer of the parent's objects: the store's open transaction is the parent's
alone). It dies with the parent (``PR_SET_PDEATHSIG``; a write to a pipe whose reader is gone
ends it too). The parent kills and reaps the child when the consumer stops early
(an error in the store, a rollback), and a child that dies mid-run (killed, out of memory) is a
:class:`WindowBuilderError` in the parent: the store's transaction rolls back.

**Where it runs.** On Linux, for a run of two windows or more (:func:`enabled`,
``rocroof.ingest.windows.build_windows``), and not when ``ROCROOF_WINDOW_PROCESS=0``.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import io
import os
import pickle
import signal
import struct
import sys
import traceback
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pandas as pd

from ..errors import RocroofError
from ..memory import release_free_memory

#: A text ``pd.Index`` of at least this many entries is sent once and referred to by key afterwards.
SHARED_INDEX_MIN = 1024

_HEADER = struct.Struct("<BQQ")  # kind, pickle bytes, out-of-band buffer count
_SIZE = struct.Struct("<Q")
_WINDOW, _END, _ERROR = 1, 2, 3


class WindowBuilderError(RocroofError):
    """The process building the windows failed in a way that does not cross as its own exception."""


def enabled() -> bool:
    """True where windows are built in a child process: Linux, unless ``ROCROOF_WINDOW_PROCESS=0``."""
    return sys.platform.startswith("linux") and os.environ.get("ROCROOF_WINDOW_PROCESS", "1") != "0"


def _define(key: int, values: Any, name: Any, dtype: Any) -> pd.Index:  # pragma: no cover - replaced on load
    raise AssertionError("resolved by _Unpickler.find_class")


def _defined(key: int) -> pd.Index:  # pragma: no cover - replaced on load
    raise AssertionError("resolved by _Unpickler.find_class")


def _is_text(dtype: Any) -> bool:
    """True for the dtype of a text index (object or pandas' string): the categories of a text column.

    Only those are shared: a window's own integer index (of filtered rows) is cheap to send (one
    buffer, out of band), and a shared index is held by both processes until the run ends.
    """
    return bool(pd.api.types.is_object_dtype(dtype)) or isinstance(dtype, pd.StringDtype)


class _Pickler(pickle.Pickler):
    """Sends each large text ``pd.Index`` once (:data:`SHARED_INDEX_MIN`, :func:`_is_text`), then by key."""

    def __init__(self, file: io.BytesIO, buffers: list[pickle.PickleBuffer], sent: dict[int, pd.Index]) -> None:
        super().__init__(file, protocol=5, buffer_callback=buffers.append)
        self._sent = sent

    def reducer_override(self, obj: Any) -> Any:
        if type(obj) is pd.Index and len(obj) >= SHARED_INDEX_MIN and _is_text(obj.dtype):
            key = id(obj)
            if key in self._sent:
                return _defined, (key,)
            self._sent[key] = obj  # held: its id stays its own while the child runs
            return _define, (key, obj.to_numpy(), obj.name, obj.dtype)
        return NotImplemented


class _Unpickler(pickle.Unpickler):
    def __init__(self, file: io.BytesIO, buffers: list[bytearray], shared: dict[int, pd.Index]) -> None:
        super().__init__(file, buffers=buffers)
        self._shared = shared

    def find_class(self, module: str, name: str) -> Any:
        if module == __name__ and name == "_define":
            return self._define
        if module == __name__ and name == "_defined":
            return self._shared.__getitem__
        return super().find_class(module, name)

    def _define(self, key: int, values: Any, name: Any, dtype: Any) -> pd.Index:
        index = pd.Index(values, name=name, dtype=dtype, copy=False)
        self._shared[key] = index
        return index


def _write_all(fd: int, data: memoryview) -> None:
    while len(data):
        data = data[os.write(fd, data) :]


def _send(fd: int, kind: int, obj: Any, sent: dict[int, pd.Index]) -> None:
    buffers: list[pickle.PickleBuffer] = []
    out = io.BytesIO()
    _Pickler(out, buffers, sent).dump(obj)
    raws = [b.raw() for b in buffers]
    head = _HEADER.pack(kind, out.tell(), len(raws)) + b"".join(_SIZE.pack(r.nbytes) for r in raws)
    _write_all(fd, memoryview(head))
    _write_all(fd, out.getbuffer())
    for raw in raws:
        _write_all(fd, raw)


class _CutShort(Exception):
    """The pipe ended in the middle of a message (the child died while sending it)."""


def _fill(fd: int, buf: bytearray) -> int:
    """Read ``fd`` into ``buf`` until it is full or the pipe ends; the bytes read."""
    view = memoryview(buf)
    got = 0
    while got < len(view):
        n = os.readv(fd, [view[got:]])
        if not n:
            break
        got += n
    return got


def _read_exactly(fd: int, n: int) -> bytearray:
    """The next ``n`` bytes of a message.

    Raises:
        _CutShort: the pipe ended before them.
    """
    buf = bytearray(n)
    if _fill(fd, buf) < n:
        raise _CutShort
    return buf


def _receive(fd: int, shared: dict[int, pd.Index]) -> tuple[int, Any] | None:
    """The next message, or None when the pipe ended between messages.

    Raises:
        _CutShort: the pipe ended in the middle of one (its header, body or a buffer).
    """
    head = bytearray(_HEADER.size)
    got = _fill(fd, head)
    if not got:
        return None
    if got < len(head):
        raise _CutShort
    kind, size, count = _HEADER.unpack(head)
    sizes = _read_exactly(fd, _SIZE.size * count)
    body = _read_exactly(fd, size)
    buffers = [_read_exactly(fd, n) for (n,) in _SIZE.iter_unpack(sizes)]
    return kind, _Unpickler(io.BytesIO(body), buffers, shared).load()


def _died(pid: int, what: str) -> WindowBuilderError:
    """The error for a child that ``what`` (reaped here), with how it ended and what to do."""
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = f"signal {number}"
        how = f"killed by {name}" + (": out of memory, or killed by a user?" if number == signal.SIGKILL else "")
    else:
        how = f"exit status {os.waitstatus_to_exitcode(status)}"
    return WindowBuilderError(
        f"the window builder process {what} ({how}); run the ingest again, or set "
        "ROCROOF_WINDOW_PROCESS=0 to build the windows in one process"
    )


def _die_with_parent(parent: int) -> None:
    """Linux: SIGKILL this process when the parent ends (the window builder is of no use then)."""
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # the parent ended before the call
        os._exit(1)


def _crossing(exc: BaseException) -> BaseException:
    """``exc`` as the parent is to raise it.

    Itself where it pickles and loads back as the same type and message, else a
    :class:`WindowBuilderError` naming it. An exception that is not a :class:`RocroofError` (a bug:
    its traceback matters) carries the child's traceback as a note.
    """
    if not isinstance(exc, RocroofError):
        with contextlib.suppress(Exception):
            exc.add_note(
                "raised in rocroof's window builder process:\n" + "".join(traceback.format_tb(exc.__traceback__))
            )
    try:
        back = pickle.loads(pickle.dumps(exc, protocol=5))
        if type(back) is type(exc) and str(back) == str(exc):
            return exc
    except Exception:  # noqa: S110 - any failure to cross is the fallback's
        pass
    return WindowBuilderError(f"building the windows failed: {type(exc).__name__}: {exc}")


def built_in_child(
    windows: Callable[[], Iterator[Any]], ended: Callable[[], Any], end: Callable[[Any], None]
) -> Iterator[Any]:
    """The items of ``windows()``, built in a forked child process (see the module's docstring).

    Args:
        windows: makes the generator (called in the child only).
        ended: called in the child once the generator is exhausted; what it returns crosses to the parent.
        end: called in the parent with that value, before this generator ends.

    Raises:
        WindowBuilderError: the child died, or raised an exception that does not cross.
        Exception: the child's own, where it crosses.
    """
    read_fd, write_fd = os.pipe()
    with contextlib.suppress(Exception):
        import fcntl

        fcntl.fcntl(write_fd, 1031, 1 << 20)  # F_SETPIPE_SZ: fewer hand-overs per window
    parent = os.getpid()
    sys.stdout.flush()
    sys.stderr.flush()
    with warnings.catch_warnings():
        # Python 3.12+ warns of fork() in a process with threads (the hash job, a sweep's other
        # ingests): the child runs rocroof's build alone, and the locks it takes are made anew
        # in it (os.register_at_fork in rocroof.spill and rocroof.memory)
        warnings.filterwarnings("ignore", message=".*fork.*", category=DeprecationWarning)
        gc.freeze()
        try:
            pid = os.fork()
        except OSError as exc:  # no memory or processes left for it
            gc.unfreeze()
            os.close(read_fd)
            os.close(write_fd)
            raise WindowBuilderError(
                f"cannot start the window builder process ({exc.strerror or exc}); set "
                "ROCROOF_WINDOW_PROCESS=0 to build the windows in one process"
            ) from exc
    if pid == 0:  # the child: build, send, leave
        code = 0
        try:
            os.close(read_fd)
            _die_with_parent(parent)
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
            sent: dict[int, pd.Index] = {}
            for item in windows():
                _send(write_fd, _WINDOW, item, sent)
                del item
            _send(write_fd, _END, ended(), sent)
        except BrokenPipeError:
            code = 1
        except BaseException as exc:  # noqa: BLE001 - every failure goes to the parent
            code = 1
            with contextlib.suppress(BaseException):
                _send(write_fd, _ERROR, _crossing(exc), {})
        finally:
            os._exit(code)
    os.close(write_fd)
    del windows  # the capture and the plan are the child's now: the parent lets its references go
    release_free_memory(force=True)
    shared: dict[int, pd.Index] = {}
    finished = False
    reaped = False
    try:
        while True:
            try:
                message = _receive(read_fd, shared)
            except _CutShort:
                reaped = True
                raise _died(pid, "ended in the middle of a window") from None
            if message is None:
                reaped = True
                raise _died(pid, "ended without finishing the windows")
            kind, obj = message
            if kind == _ERROR:
                raise obj
            if kind == _END:
                end(obj)
                finished = True
                return
            yield obj
            del obj
    finally:
        gc.unfreeze()
        os.close(read_fd)
        if not reaped:
            if not finished:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
