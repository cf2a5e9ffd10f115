"""Files the tools read and write: an SGLang source tree (``sglang-arch upstream`` and
``sglang-arch audit``) and output files (``sglang-arch tune``).  Not part of the registry:
the registry's own reader is ``arch.validate``.

Both tools read Python files of a tree the user names.  Every file goes through
``read_source``: a regular file (a FIFO, a device or a directory is refused before it is
opened, so nothing blocks), at most ``MAX_SOURCE_BYTES``, UTF-8; the error names the
file and what is accepted.  ``python_tree`` is the audit's one parse: CPython's parser,
with source nested deeper than it takes reported in one line instead of a traceback.
"""

from __future__ import annotations

import ast
import contextlib
import errno
import hashlib
import json
import os
import re
import secrets
import stat
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from . import interrupts
from .arch.validate import MIB, read_regular_file, shown_path

# SGLang 0.5.23's largest .py file is under 0.5 MB; 8x that and more.
MAX_SOURCE_BYTES = 4 * MIB
# Python files one tree walk reads (SGLang 0.5.23's package has about 4,700).
MAX_SOURCE_FILES = 50_000


class SourceError(ValueError):
    """A file of the tree that cannot be read as source (the message names it)."""


def read_source(path: "os.PathLike[str] | str", errors: str = "strict") -> str:
    """The text of the Python source file ``path``; SourceError naming it otherwise
    (``errors="replace"``: bytes that are not UTF-8 become U+FFFD instead)."""
    where = shown_path(path)
    try:
        data = read_regular_file(os.fspath(path), MAX_SOURCE_BYTES)
    except OSError as exc:
        raise SourceError(f"{where}: cannot be read ({exc.strerror or exc})") from None
    except ValueError as exc:
        raise SourceError(f"{where}: {exc}; accepted: a regular file of at most {MAX_SOURCE_BYTES} bytes "
                          f"of UTF-8 Python source") from None
    try:
        return data.decode("utf-8", errors)
    except UnicodeDecodeError as exc:
        raise SourceError(f"{where}: not UTF-8 (byte {exc.start}); accepted: UTF-8 Python source") from None


def python_tree(text: str) -> Tuple[Optional[ast.Module], Optional[str]]:
    """CPython's reading of ``text``: (its syntax tree, None); (None, why) when it is nested
    deeper than CPython's parser takes (too many parentheses or indentation levels, a
    RecursionError or MemoryError in the parser) or holds a NUL byte; (None, None) for any
    other syntax error, which the caller reports with the parser's own message.  A leading
    UTF-8 byte-order mark is read as CPython reads the file's bytes: not part of the code."""
    if text.startswith("\ufeff"):
        text = text[1:]  # on line 1 only: every line number stays
    try:
        return ast.parse(text), None
    except SyntaxError as exc:
        if exc.msg.startswith("too many") or "too complex" in exc.msg:  # nested parentheses, indentation levels
            return None, f"{exc.msg}, line {exc.lineno}"
        return None, None
    except (RecursionError, MemoryError):
        return None, "nested too deeply for Python's parser"
    except ValueError as exc:  # a NUL byte
        return None, str(exc)


# --- writing: one staging primitive for every writer -------------------------------------
#
# ``upstream`` (the series, with or without git) and ``tune`` (--out, --results) write
# through ``Transaction``: stage all, check all, put in place, roll back on any failure.

ACCEPTED = "accepted: a new file in an existing folder, or an existing regular file (replaced)"


# ``Write.expect`` when the run did not read the file (any content may be replaced).
ANY = object()


@dataclass(frozen=True)
class Write:
    """A file one run writes: ``text`` (UTF-8) at ``path``, or ``path`` removed when
    ``text`` is None.  ``what`` names it in errors (``--out``; default: the path alone);
    ``make_folders``: folders missing on the way are made (else the write is refused).
    ``expect``: what the run read there (None: no file), checked again just before the
    file is replaced, so that an edit another program made since is never overwritten."""

    path: str
    text: Optional[str]
    what: str = ""
    make_folders: bool = False
    expect: Any = field(default=ANY, compare=False)

    @property
    def label(self) -> str:
        return f"{self.what} {shown_path(self.path)}" if self.what else shown_path(self.path)


def _kind(mode: int) -> str:
    return ("a folder" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode)
            else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
            else "a socket" if stat.S_ISSOCK(mode) else "not a regular file")


def check_writes(writes: Sequence[Write], probe: bool = False, distinct: bool = True) -> None:
    """Every write may happen, or a ValueError naming the first that may not: two writes
    never name one file (unless not ``distinct``: later ones replace earlier ones); a target is absent or a regular file (a symlink to one is
    replaced by the new file, its target left alone) that this process may write; FIFOs,
    devices, sockets and folders are refused before anything is opened (writing to them
    would block, fail half-way or land outside the file named); its folder exists (or
    may be made) and is writable.  ``probe``: a file is also made and removed in each
    folder, which finds what permissions cannot show (a read-only file system, no space
    for a new name), so a long run checks its outputs before it starts."""
    seen: Dict[str, Write] = {}
    for write in writes:
        key = os.path.realpath(write.path)
        if key in seen and distinct:
            raise ValueError(f"{seen[key].label} and {write.label} name the same file; accepted: a different "
                             f"file for each")
        seen[key] = write
        _check_write(write, probe)


def _check_write(write: Write, probe: bool) -> None:
    if os.path.basename(write.path) == JOURNAL:
        raise ValueError(f"{write.label}: cannot write: {JOURNAL} is the name of the journal a run keeps in its "
                         f"folder; {ACCEPTED}, named otherwise")
    try:
        st: Optional[os.stat_result] = os.stat(write.path)
    except FileNotFoundError:
        st = None
    except OSError as exc:  # a file on the way (ENOTDIR), a loop, no permission to look
        raise ValueError(f"{write.label}: cannot write: {exc.strerror or exc}; {ACCEPTED}") from None
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise ValueError(f"{write.label}: cannot write: it is {_kind(st.st_mode)}, not a regular file; {ACCEPTED}")
    if st is not None and not os.access(write.path, os.W_OK):
        raise ValueError(f"{write.label}: cannot write: it is read-only; {ACCEPTED}")
    if st is None and write.text is None:
        return  # nothing to remove
    folder = os.path.dirname(write.path) or "."
    existing = folder
    while not os.path.lexists(existing) and os.path.dirname(existing) != existing:
        existing = os.path.dirname(existing) or "."
    if existing != folder and not write.make_folders:
        raise ValueError(f"{write.label}: cannot write: the folder {shown_path(folder)} does not exist; {ACCEPTED}")
    if not os.path.isdir(existing):
        raise ValueError(f"{write.label}: cannot write: {shown_path(existing)} is not a folder; {ACCEPTED}")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ValueError(f"{write.label}: cannot write: the folder {shown_path(existing)} is not writable")
    if probe and existing == folder:
        try:
            os.unlink(_new_file(write.path, "probe", b""))
        except OSError as exc:
            raise ValueError(f"{write.label}: cannot write: {exc.strerror or exc}") from None


# The longest file name a folder takes where ``pathconf`` cannot say (POSIX's NAME_MAX on
# Linux, macOS and the BSDs).
NAME_MAX_DEFAULT = 255


def _name_max(folder: str) -> int:
    try:
        return int(os.pathconf(folder, "PC_NAME_MAX"))
    except (OSError, ValueError, AttributeError):
        return NAME_MAX_DEFAULT


def _temp_name(path: str, kind: str) -> str:
    """A name beside ``path`` for its staged text (``tmp``) or the file it replaces (``bak``):
    ``.NAME.PID.RANDOM.KIND``, with NAME cut (in bytes, as the file system counts) so that
    the whole stays within the folder's name limit: a target whose own name is near the
    limit is still written."""
    folder = os.path.dirname(path) or "."
    tail = os.fsencode(f".{os.getpid()}.{secrets.token_hex(4)}.{kind}")
    room = max(0, _name_max(folder) - len(tail) - 1)
    name = b"." + os.fsencode(os.path.basename(path))[:room] + tail
    return os.path.join(folder, os.fsdecode(name))


def _new_file(path: str, kind: str, data: bytes, mode: Optional[int] = None, name: Optional[str] = None) -> str:
    """``data`` in a new file beside ``path`` (synced; the permissions a new file gets under
    the umask, or ``mode``); returns its name (``name``, chosen before, or a new one).
    OSError when it cannot be made."""
    tmp = name or _temp_name(path, kind)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o666)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return tmp


@contextlib.contextmanager
def folder_lock(folder: "os.PathLike[str] | str", wait: float = 0.0) -> Iterator[None]:
    """An exclusive advisory lock (``flock``) on ``folder`` while the block runs: a second
    sglang-arch writer there waits up to ``wait`` seconds, then is refused (ValueError).
    The lock is the folder's own (its inode), so every path that reaches the folder (a
    symlink, ``..``) takes the same lock.  Nothing is written into the folder; where
    ``flock`` does not exist (Windows), no lock."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield
        return
    where = shown_path(folder)
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError as exc:
        raise ValueError(f"{where}: cannot lock the folder: {exc.strerror or exc}") from None
    try:
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError:
                if time.monotonic() >= deadline:
                    raise ValueError(f"{where}: another sglang-arch run is writing here (it holds the folder's "
                                     f"lock); try again when it has finished") from None
                time.sleep(0.05)
        yield
    finally:
        os.close(fd)


@contextlib.contextmanager
def folder_locks(folders: Sequence[str], wait: float = 0.0) -> Iterator[None]:
    """``folder_lock`` on each of ``folders`` (each once, whatever the spelling; in one
    order for every run, so two runs never hold one each)."""
    unique: Dict[Tuple[int, int], str] = {}
    for folder in folders:
        try:
            st = os.stat(folder)
        except OSError as exc:
            raise ValueError(f"{shown_path(folder)}: cannot lock the folder: {exc.strerror or exc}") from None
        unique.setdefault((st.st_dev, st.st_ino), folder)
    with contextlib.ExitStack() as stack:
        for key in sorted(unique):
            stack.enter_context(folder_lock(unique[key], wait))
        yield


# --- the journal: what a run killed outright (SIGKILL, power loss) leaves, undone -------
#
# A transaction with a journal folder writes, before its first staged file exists, the
# names of every file it will make (staged texts, kept originals) and what each target
# held; it removes the journal once the run is whole or rolled back.  A journal still
# there when the next run takes the folder's lock is a run that was killed: ``recover``
# puts every target back as it was (unless another program changed it since) and removes
# the run's files, so the next run starts from the state before the killed one.

JOURNAL = ".sglang-arch-journal"
JOURNAL_VERSION = 1


def digest(data: Optional[bytes]) -> Optional[str]:
    return None if data is None else hashlib.sha256(data).hexdigest()


def _file_digest(path: str) -> Optional[str]:
    """The digest of the regular file at ``path`` (None: nothing there); a symlink or other
    kind of file gives its kind, never equal to a digest."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return f"<{_kind(st.st_mode)}>"
    with open(path, "rb") as fh:
        return digest(fh.read())


def journal_path(folder: str) -> str:
    return os.path.join(folder, JOURNAL)


def _write_journal(folder: str, doc: Dict[str, Any]) -> None:
    """The journal, whole or not at all (a staged file renamed over it, synced)."""
    path = journal_path(folder)
    tmp = _new_file(path, "tmp", json.dumps(doc, indent=1).encode("utf-8"))
    os.replace(tmp, path)
    _sync_folder(folder)


def _sync_folder(folder: str) -> None:
    with contextlib.suppress(OSError, AttributeError):
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def read_journal(folder: str) -> Optional[Dict[str, Any]]:
    """The journal a killed run left in ``folder`` (None: none); ValueError naming the file
    when it is not one this version wrote."""
    path = journal_path(folder)
    if not os.path.lexists(path):
        return None
    try:
        doc = json.loads(read_regular_file(path, MAX_SOURCE_BYTES).decode("utf-8"))
        if not isinstance(doc, dict) or doc.get("version") != JOURNAL_VERSION or not isinstance(doc.get("entries"), list):
            raise ValueError("not a journal of this version")
    except (OSError, ValueError) as exc:
        raise ValueError(f"{shown_path(path)}: an interrupted run's journal that cannot be read ({exc}); accepted: "
                         f"the file as sglang-arch wrote it (remove it once you have checked the files it names)") from None
    return doc


def recover(folder: str, on_extra: Optional[Callable[[Dict[str, Any]], Optional[str]]] = None,
            within: Optional[Sequence[str]] = None) -> Optional[str]:
    """Undo what a killed run left in ``folder`` (the caller holds its lock): None when
    there was nothing, else one line saying what was undone.  ``on_extra`` undoes the
    caller's own part first (``upstream --into-git``: HEAD and the index); ValueError where
    it cannot, with nothing changed.  A target another program changed since the kill is
    left as it is (named in the line).  ``within``: the folders the journal's files may be
    in (default: ``folder``); a journal naming any other file, or a staged or kept name
    that is not the run's own pattern beside its target, is refused whole (a journal is
    a file in the user's tree: one planted there must not move or remove anything else)."""
    doc = read_journal(folder)
    if doc is None:
        return None
    entries = doc["entries"]
    _check_journal(folder, doc, within or [folder])
    notes = []
    if doc.get("state") == "writing":
        if on_extra is not None and doc.get("extra"):
            note = on_extra(doc["extra"])
            if note:
                notes.append(note)
        restored, kept = _undo_entries(entries)
        if restored:
            notes.append(f"{restored} file(s) put back as they were")
        if kept:
            notes.append(f"left as another program changed them since: {', '.join(kept[:3])}"
                         + (f" and {len(kept) - 3} more" if len(kept) > 3 else ""))
        for made in reversed(doc.get("made", [])):
            with contextlib.suppress(OSError):
                os.rmdir(made)
    for entry in entries:  # whole or undone: the run's own files go
        for name in (entry.get("tmp"), entry.get("bak")):
            if name:
                with contextlib.suppress(OSError):
                    os.unlink(name)
    os.unlink(journal_path(folder))
    _sync_folder(folder)
    if doc.get("state") != "writing":
        return None  # the run was whole: only its leftovers went
    return (f"sglang-arch: a run killed while it wrote here (pid {doc.get('pid')}) was undone first"
            + (f": {'; '.join(notes)}" if notes else ""))


_RUN_FILE = re.compile(r"^\..*\.[0-9]+\.[0-9a-f]{8}\.(tmp|bak)$", re.S)


def _inside(path: str, roots: Sequence[str]) -> bool:
    real = os.path.realpath(path)
    return any(real == r or real.startswith(r.rstrip(os.sep) + os.sep) for r in map(os.path.realpath, roots))


def _check_journal(folder: str, doc: Dict[str, Any], within: Sequence[str]) -> None:
    where = shown_path(journal_path(folder))
    accepted = ("accepted: a journal sglang-arch wrote for files in this folder (check the files it names, "
                "then remove it)")
    for entry in doc["entries"]:
        path = entry.get("path") if isinstance(entry, dict) else None
        if not isinstance(path, str) or not os.path.isabs(path) or not _inside(path, within):
            raise ValueError(f"{where}: an interrupted run's journal names {shown_path(path)}, outside "
                             f"{', '.join(shown_path(w) for w in within)}; nothing was changed; {accepted}")
        for name in (entry.get("tmp"), entry.get("bak")):
            if name is not None and not (isinstance(name, str) and os.path.dirname(name) == os.path.dirname(path)
                                         and _RUN_FILE.match(os.path.basename(name))):
                raise ValueError(f"{where}: an interrupted run's journal names {shown_path(name)} as its own file "
                                 f"beside {shown_path(path)}, which is not a name a run makes; nothing was changed; "
                                 f"{accepted}")
    made = doc.get("made", [])
    if not isinstance(made, list) or not all(isinstance(m, str) and _inside(m, within) for m in made):
        raise ValueError(f"{where}: an interrupted run's journal names folders outside "
                         f"{', '.join(shown_path(w) for w in within)}; nothing was changed; {accepted}")


def _undo_entries(entries: List[Dict[str, Any]]) -> Tuple[int, List[str]]:
    """Each target back as it was before the run, last write first; (how many, those
    another program changed since)."""
    restored, kept = 0, []
    for entry in reversed(entries):
        path, bak = entry["path"], entry.get("bak")
        now = _file_digest(path)
        ours = now is None if entry.get("new") is None else now == entry.get("new")
        if bak and os.path.lexists(bak):  # the run replaced (or removed) the file: the original is here
            if ours:
                os.replace(bak, path)
                restored += 1
            else:
                kept.append(shown_path(path))
        elif not entry.get("existed") and entry.get("new") is not None and now == entry.get("new"):
            os.unlink(path)  # a file the run made
            restored += 1
    return restored, kept


def stale_journal(folder: str) -> Optional[str]:
    """The journal a killed run left in ``folder``, if any (for a reader that must not
    trust the files before the next writer undoes it)."""
    path = journal_path(folder)
    return path if os.path.lexists(path) else None


class Transaction:
    """Stage all, check all, put in place, roll back on any failure.

    Entering checks every write (``check_writes``) and stages every new text in a
    temporary file beside its target (making the missing folders it may), before anything
    is replaced; a failure there removes what was staged.  ``put(writes)`` puts those
    writes in place, each in one rename (a reader never sees half a file), keeping the
    file it replaces beside it until the end; leaving the block puts whatever is left.
    Any exception inside the block (a put, or the caller's own work between puts, such as
    a git commit) undoes everything in reverse order: replaced and removed files come
    back, new files and the folders made for them go, and the caller's ``on_rollback``
    actions run; a ValueError then says so.  ``lock``: folders held (``folder_lock``) from
    the check to the end.  ``distinct=False``: several writes may name one file, each
    put replacing the one before (a series step on top of an earlier step's edit).
    """

    def __init__(self, writes: Sequence[Write], lock: Sequence[str] = (), distinct: bool = True,
                 journal: Optional[str] = None, extra: Optional[Dict[str, Any]] = None) -> None:
        self.writes = list(writes)
        self._distinct = distinct
        self._lock = sorted(set(lock))
        self._journal = journal  # the folder of the journal (locked by the caller or by ``lock``)
        self._extra = extra  # the caller's part of the journal (``recover``'s ``on_extra``)
        self._names: Dict[int, Tuple[str, str]] = {}  # id(write) -> (its staged name, its kept name)
        self._stack = contextlib.ExitStack()
        self._staged: Dict[int, str] = {}  # id(write) -> its staged file
        self._made: List[str] = []  # folders made for new files, in order
        self._undo: List[Tuple[str, Callable[[], Optional[str]]]] = []  # (what, how), undone last first
        self._kept: List[str] = []  # the files replaced or removed, until the end
        self._done: set = set()  # id(write) of those in place
        self._present: set = set()  # paths there at the check, or put there since by this transaction

    def __enter__(self) -> "Transaction":
        try:
            if self._lock:
                self._stack.enter_context(folder_locks(self._lock))
            check_writes(self.writes, distinct=self._distinct)
            self._present = {w.path for w in self.writes if os.path.lexists(w.path)}
            seen = set()
            for write in self.writes:  # the first write of each file: a later one expects the earlier's text
                if write.path not in seen:
                    _refuse_changed(write, "before it was written")
                seen.add(write.path)
            if self._journal is not None:
                with interrupts.deferred():
                    self._begin_journal()
            for write in self.writes:
                if write.text is not None:
                    with interrupts.deferred():  # a staged file is recorded as soon as it exists
                        self._staged[id(write)] = self._stage(write)
            interrupts.checkpoint("staged")
        except BaseException:
            with interrupts.deferred():
                self._discard(folders=True)
                if self._names and self._journal is not None:
                    self._drop_journal()
                self._undo.clear()
                self._stack.close()
            raise
        return self

    def _begin_journal(self) -> None:
        """Every name the run will make, and what each target holds, on disk before the
        first of them exists (``recover`` reads it after a kill)."""
        entries, made = [], []
        for write in self.writes:
            self._names[id(write)] = (_temp_name(write.path, "tmp"), _temp_name(write.path, "bak"))
            tmp, bak = self._names[id(write)]
            try:
                new = None if write.text is None else digest(write.text.encode("utf-8"))
            except UnicodeEncodeError:
                new = None  # refused when staged
            entries.append({"path": os.path.abspath(write.path), "tmp": os.path.abspath(tmp),
                            "bak": os.path.abspath(bak), "existed": write.path in self._present, "new": new})
            folder = os.path.dirname(os.path.abspath(write.path))
            missing = []
            while not os.path.lexists(folder):
                missing.append(folder)
                folder = os.path.dirname(folder)
            made += [m for m in reversed(missing) if m not in made]
        doc = {"version": JOURNAL_VERSION, "state": "writing", "pid": os.getpid(), "entries": entries,
               "made": made, "extra": self._extra}
        try:
            _write_journal(self._journal, doc)  # type: ignore[arg-type]
        except OSError as exc:
            raise ValueError(f"{shown_path(journal_path(self._journal))}: cannot write the run's journal: "  # type: ignore[arg-type]
                             f"{exc.strerror or exc}; nothing was written") from None
        self._undo.append(("the run's journal", self._drop_journal))

    def _drop_journal(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(journal_path(self._journal))  # type: ignore[arg-type]
        _sync_folder(self._journal)  # type: ignore[arg-type]

    def _stage(self, write: Write) -> str:
        folder = os.path.dirname(write.path) or "."
        missing = []
        while not os.path.lexists(folder):
            missing.append(folder)
            folder = os.path.dirname(folder)
        try:
            for folder in reversed(missing):
                os.mkdir(folder)
                self._made.append(folder)
            mode = stat.S_IMODE(os.stat(write.path).st_mode) if os.path.isfile(write.path) else None
            name = self._names.get(id(write), (None, None))[0]
            return _new_file(write.path, "tmp", write.text.encode("utf-8"), mode, name=name)  # type: ignore[union-attr]
        except OSError as exc:
            raise ValueError(f"{write.label}: cannot write: {exc.strerror or exc}; nothing was written") from None
        except UnicodeEncodeError as exc:
            raise ValueError(f"{write.label}: cannot write: text is not UTF-8 encodable ({exc.reason}); "
                             f"nothing was written") from None

    def on_rollback(self, what: str, action: Callable[[], Optional[str]]) -> None:
        """Run ``action`` if the transaction rolls back (in reverse order with the file
        restores); what it returns, if anything, is added to the error (``what``: named
        when it fails)."""
        self._undo.append((what, action))

    def put(self, writes: Optional[Sequence[Write]] = None) -> None:
        """Put ``writes`` (default: every one not yet in place) in place, in order."""
        for write in self.writes if writes is None else writes:
            if id(write) not in self._done:
                try:
                    with interrupts.deferred():  # a rename and the record that undoes it, together
                        self._put(write)
                        self._done.add(id(write))
                except OSError as exc:
                    raise ValueError(f"{write.label}: cannot write: {exc.strerror or exc}") from None
                interrupts.checkpoint(f"put:{len(self._done)}")

    def _put(self, write: Write) -> None:
        path = write.path
        present = path in self._present
        _refuse_changed(write, "while the run wrote")
        kept = self._names[id(write)][1] if id(write) in self._names else _temp_name(path, "bak")
        if write.text is None:
            if present:
                os.rename(path, kept)
                self._keep(path, kept, None)
                self._present.discard(path)
            return
        tmp = self._staged[id(write)]
        if present:
            _hard_link(path, kept)  # the file as it is, under a second name (a symlink stays a symlink)
            try:
                os.replace(tmp, path)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(kept)
                raise
            self._keep(path, kept, digest(write.text.encode("utf-8")))  # type: ignore[union-attr]
        else:
            try:  # a link fails where a file appeared since the check: never replace one not ours
                os.link(tmp, path, follow_symlinks=False)
                os.unlink(tmp)
            except OSError as exc:
                if exc.errno == errno.EEXIST or not _no_hard_links(exc):
                    raise
                os.replace(tmp, path)
            written = digest(write.text.encode("utf-8"))  # type: ignore[union-attr]
            self._undo.append((path, lambda: _undo_if_ours(path, written, lambda: os.unlink(path))))
            self._present.add(path)
        del self._staged[id(write)]

    def _keep(self, path: str, kept: str, written: Optional[str]) -> None:
        self._kept.append(kept)
        self._undo.append((path, lambda: _undo_if_ours(path, written, lambda: os.replace(kept, path))))

    def __exit__(self, kind, exc, tb) -> None:
        try:
            if kind is None:
                try:
                    self.put()
                except BaseException as failure:
                    self._rollback(failure)
                    raise AssertionError("unreachable")  # pragma: no cover - _rollback raises
                # The point of no return: a signal that came in the last moment still undoes
                # the run (then goes on to its handler); past it, the run is whole.
                with interrupts.deferred():
                    interrupts.checkpoint("commit")
                    if interrupts.pending():
                        self._rollback(None)
                    else:
                        if self._journal is not None:  # whole: a kill from here on leaves only leftovers
                            self._journal_done()
                        for kept in self._kept:
                            with contextlib.suppress(OSError):
                                os.unlink(kept)
                        self._kept.clear()
                        self._undo.clear()
                        if self._journal is not None:
                            self._drop_journal()
                        interrupts.mark_completed()
                interrupts.checkpoint("done")
                return
            self._rollback(exc)
        finally:
            with interrupts.deferred():
                self._discard(folders=False)
                self._stack.close()

    def _journal_done(self) -> None:
        try:
            doc = read_journal(self._journal)  # type: ignore[arg-type]
            if doc is not None:
                _write_journal(self._journal, dict(doc, state="done"))  # type: ignore[arg-type]
        except (OSError, ValueError):
            pass  # the journal still says "writing": a kill now would undo a whole run, never half of one

    def _rollback(self, failure: Optional[BaseException]) -> None:
        """Undo everything, whole: signals are held until it has finished (then delivered).
        ``failure`` None: a held signal is the cause; nothing is raised here."""
        with interrupts.deferred():
            self._undo_all(failure)

    def _undo_all(self, failure: Optional[BaseException]) -> None:
        notes, problems = [], []
        for i, (what, action) in enumerate(reversed(self._undo), 1):
            try:
                note = action()
            except Exception as exc:  # noqa: BLE001 - every undo is tried, each failure named
                problems.append(f"{shown_path(what)} ({getattr(exc, 'strerror', None) or exc})")
            else:
                if isinstance(note, str):
                    notes.append(note)
            interrupts.checkpoint(f"rollback:{i}")
        undone = bool(self._undo)
        self._undo.clear()
        self._discard(folders=True)
        if failure is None and not problems:
            return
        if failure is None:
            failure = ValueError("interrupted")
        if problems:
            raise ValueError(f"{failure}; rolling back failed for {', '.join(problems)}: these are left as the "
                             f"run made them") from None
        if not isinstance(failure, ValueError):
            raise failure  # a bug or an interrupt: itself, after the roll back
        tail = "everything written was undone" if undone else "nothing was written"
        tail += "".join(f", {note}" for note in notes)
        raise ValueError(f"{failure}; {tail}") from None

    def _discard(self, folders: bool) -> None:
        """Remove the staged files not put in place, and with ``folders`` the folders made
        for them (those left empty)."""
        for tmp in self._staged.values():
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        self._staged.clear()
        if folders:
            for folder in reversed(self._made):
                with contextlib.suppress(OSError):
                    os.rmdir(folder)
            self._made.clear()


def _undo_if_ours(path: str, written: Optional[str], undo: Callable[[], None]) -> Optional[str]:
    """``undo`` where ``path`` still holds what the run wrote (``written``; None: the run
    removed it); a file another program wrote since is left as it is, and said so."""
    if _file_digest(path) != written:
        return f"{shown_path(path)} left as another program changed it during the run"
    undo()
    return None


def _refuse_changed(write: Write, when: str) -> None:
    """ValueError where the file at ``write.path`` is no longer what the run read there."""
    if write.expect is ANY:
        return
    try:
        now = _file_digest(write.path)
    except OSError as exc:
        raise ValueError(f"{write.label}: cannot read it again: {exc.strerror or exc}") from None
    expected = None if write.expect is None else digest(write.expect.encode("utf-8"))
    if now != expected:
        raise ValueError(f"{write.label}: changed by another program {when} (it no longer holds what this run "
                         f"read); nothing of that change is overwritten; accepted: run again once it is done")


def _hard_link(path: str, kept: str) -> None:
    """``kept``: a second name of the file ``path`` (a copy where hard links do not exist)."""
    try:
        os.link(path, kept, follow_symlinks=False)
    except OSError as exc:
        if not _no_hard_links(exc):
            raise
        if os.path.islink(path):
            os.symlink(os.readlink(path), kept)
        else:
            import shutil

            shutil.copy2(path, kept)


def _no_hard_links(exc: OSError) -> bool:
    return exc.errno in (errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EXDEV, errno.EMLINK, errno.ENOSYS)


# Seconds a ``tune`` output waits for another sglang-arch run writing the same folder
# (two ``tune fusion --out`` runs at once: the second reads the file once the first has written it).
OUTPUT_LOCK_WAIT = 30.0


def _folders(paths: Sequence[str]) -> List[str]:
    return sorted({os.path.dirname(os.path.abspath(p)) for p in paths})


@contextlib.contextmanager
def output_lock(paths: Sequence[str], wait: float = OUTPUT_LOCK_WAIT) -> Iterator[List[str]]:
    """The folders of ``paths`` locked (waiting up to ``wait`` seconds for another run), and
    what a run killed while it wrote there left undone first: a caller reads the files it
    will update inside the block, so no other run's update falls between its read and
    its write.  Yields the lines saying what was undone (usually none)."""
    folders = _folders(paths)
    with folder_locks(folders, wait):
        notes = [note for note in (recover(folder, within=folders) for folder in folders) if note]
        yield notes


def write_files(outputs: Sequence[Tuple[str, str, str]], expect: Optional[Dict[str, Optional[str]]] = None,
                held: bool = False) -> List[str]:
    """Write each ``(what, path, text)`` in one transaction: all of them, or none (their
    folders locked while it runs, and a journal kept so that a kill leaves nothing half
    done for the next run).  ``expect``: path -> the text read there (None: no file), not
    overwritten if another program changed it since; ``held``: the caller holds
    ``output_lock`` already.  Errors are ValueErrors naming ``what`` and the path.
    Returns the lines saying what a killed earlier run left and was undone."""
    writes = [Write(path, text, what, expect=(expect if expect is not None else {}).get(path, ANY))
              for what, path, text in outputs]
    if not writes:
        return []
    if held:
        with Transaction(writes, journal=_folders([w.path for w in writes])[0]):
            pass
        return []
    with output_lock([w.path for w in writes], wait=0.0) as notes:
        with Transaction(writes, journal=_folders([w.path for w in writes])[0]):
            pass
    return notes


def check_outputs(outputs: Sequence[Tuple[str, str]]) -> None:
    """Outputs ``(what, path)`` that ``write_files`` will write later, checked now (and
    probed: ``check_writes``), before the work that makes their text starts."""
    check_writes([Write(path, "", what) for what, path in outputs], probe=True)
