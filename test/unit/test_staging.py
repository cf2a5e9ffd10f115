"""``files.Transaction``, the one staging primitive every writer uses (``upstream``'s
series, ``tune``'s outputs): stage all, check all, put in place, roll back on any failure.

The property: whatever the writes (new files in new folders, replaced files, removed
files, one file written twice) and wherever a fault strikes (a rename failing between two
others, a staged file that vanishes, a target that turns into a folder, a file that
cannot be staged, the caller failing between two puts, a second writer holding the
lock), afterwards the folder holds exactly what it held before, or exactly what the
writes make of it: never a mix, never a leftover temporary file.  hypothesis drives the
writes and the fault's kind and place.
"""

import contextlib
import errno
import fcntl
import os

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from sglang_arch import files
from sglang_arch.files import Transaction, Write, check_writes

NAMES = ["a.py", "b.txt", "sub/c.py", "sub/deep/d.py", "new/e.py", "new/deeper/f.py"]


def snapshot(root):
    """Every path under root: its bytes, or "<dir>" / "<link>" (what a failed run must leave as it was)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            if os.path.islink(path):
                out[rel] = "<link>" + os.readlink(path)
            elif os.path.isdir(path):
                out[rel] = "<dir>"
            else:
                with open(path, "rb") as fh:
                    out[rel] = fh.read()
    return out


def expected(before, writes, root):
    """What ``writes`` make of the folder ``before`` (folders made on the way included)."""
    after = dict(before)
    for write in writes:
        rel = os.path.relpath(write.path, root)
        if write.text is None:
            after.pop(rel, None)
            continue
        parts = rel.split(os.sep)
        for i in range(1, len(parts)):
            after.setdefault(os.sep.join(parts[:i]), "<dir>")
        after[rel] = write.text.encode()
    return after


# Existing files (a.py, b.txt, sub/c.py are there before each run), then what the run does.
PLAN = st.lists(st.tuples(st.sampled_from(NAMES), st.one_of(st.none(), st.text(max_size=20))), min_size=1,
                max_size=8)
FAULTS = st.sampled_from(["none", "replace", "link", "vanish", "stage", "caller", "lock"])


def _existing(root):
    os.makedirs(root / "sub", exist_ok=True)
    (root / "a.py").write_text("A = 1\n")
    (root / "b.txt").write_text("b\n")
    (root / "sub" / "c.py").write_text("C = 3\n")
    os.symlink("a.py", root / "link.py")


@settings(max_examples=60, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan=PLAN, fault=FAULTS, at=st.integers(1, 8), make_folders=st.booleans())
def test_a_fault_anywhere_leaves_the_folder_as_it_was_or_the_run_completes(tmp_path_factory, monkeypatch, plan,
                                                                             fault, at, make_folders):
    root = tmp_path_factory.mktemp("tx")
    _existing(root)
    writes = [Write(str(root / name), text, make_folders=make_folders) for name, text in plan]
    before = snapshot(root)
    calls = {"n": 0}

    def nth() -> bool:
        calls["n"] += 1
        return calls["n"] == at

    with monkeypatch.context() as patch:
        real_replace, real_link, real_new = os.replace, os.link, files._new_file

        def renaming(real, error):
            def call(src, dst, *args, **kwargs):
                if fault in (error, "vanish") and nth():
                    if fault != "vanish":
                        raise OSError(errno.EIO, f"Input/output error ({error})")
                    if str(src).endswith(".tmp"):
                        os.unlink(src)  # the staged file is gone (a cleaner of temporary files): the call fails
                return real(src, dst, *args, **kwargs)
            return call

        def new_file(*args, **kwargs):
            if fault == "stage" and nth():
                raise OSError(errno.EDQUOT, "Disk quota exceeded")
            return real_new(*args, **kwargs)

        patch.setattr(files.os, "replace", renaming(real_replace, "replace"))
        patch.setattr(files.os, "link", renaming(real_link, "link"))
        patch.setattr(files, "_new_file", new_file)
        with contextlib.ExitStack() as stack:
            if fault == "lock":  # a second writer, holding the folder's lock
                fd = os.open(root, os.O_RDONLY)
                stack.callback(os.close, fd)
                fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                with Transaction(writes, lock=[str(root)], distinct=False) as tx:
                    for i, write in enumerate(writes, 1):
                        if fault == "caller" and i == at:
                            raise ValueError(f"{root}: git commit failed")  # the caller's work between two puts
                        tx.put([write])
            except ValueError as exc:
                failed = str(exc)
            else:
                failed = None
    after = snapshot(root)
    event(f"{fault}: {'rolled back' if failed else 'completed'}")
    if failed is None:
        assert after == expected(before, writes, root)
    else:
        assert after == before, failed
        assert "\n" not in failed and str(root) in failed, failed  # one line, naming the file or the folder
    if fault in ("lock", "caller") and at <= len(writes):
        assert failed is not None  # these faults always strike


def test_a_rollback_that_cannot_restore_says_what_is_left(tmp_path, monkeypatch):
    (tmp_path / "a.py").write_text("old\n")
    writes = [Write(str(tmp_path / "a.py"), "new\n")]

    def read_only(*args):
        raise OSError(errno.EROFS, "Read-only file system")

    with pytest.raises(ValueError) as exc:
        with Transaction(writes) as tx:
            tx.put()
            monkeypatch.setattr(files.os, "replace", read_only)
            raise ValueError("git commit failed")
    monkeypatch.undo()
    assert "git commit failed; rolling back failed for" in str(exc.value) and "Read-only file system" in str(exc.value)
    assert "a.py" in str(exc.value)


def test_a_file_that_appears_after_the_check_is_never_replaced(tmp_path, monkeypatch):
    """A new file is put in place with a hard link, which fails where a file appeared since
    the check: the other writer's file stays, the run is undone."""
    target = tmp_path / "new.py"
    writes = [Write(str(tmp_path / "first.py"), "1\n"), Write(str(target), "ours\n")]
    with pytest.raises(ValueError, match="new.py: cannot write: File exists"):
        with Transaction(writes) as tx:
            tx.put(writes[:1])
            target.write_text("theirs\n")
            tx.put(writes[1:])
    assert target.read_text() == "theirs\n" and sorted(os.listdir(tmp_path)) == ["new.py"]


def test_an_interrupt_rolls_back_and_goes_on(tmp_path):
    (tmp_path / "a.py").write_text("old\n")
    with pytest.raises(KeyboardInterrupt):
        with Transaction([Write(str(tmp_path / "a.py"), "new\n")]) as tx:
            tx.put()
            raise KeyboardInterrupt
    assert snapshot(tmp_path) == {"a.py": b"old\n"}


@pytest.mark.parametrize("make, message", [
    (lambda p: None, "the folder"),  # a folder that does not exist
    (lambda p: p.parent.parent.mkdir() or p.parent.write_text("x"), "Not a directory"),  # a file on the way
    (lambda p: p.parent.mkdir(parents=True) or p.mkdir(), "it is a folder, not a regular file"),
])
def test_outputs_are_checked_before_any_work(tmp_path, make, message):
    target = tmp_path / "out" / "dir" / "o.toml"
    make(target)
    with pytest.raises(ValueError, match=message):
        check_writes([Write(str(target), "", "--out")], probe=True)


def test_the_probe_finds_what_permissions_do_not_show(tmp_path, monkeypatch):
    """Root may write anywhere by permission bits; a read-only file system says no only when tried."""
    real = files._new_file

    def read_only(path, kind, *args, **kwargs):
        if kind == "probe":
            raise OSError(errno.EROFS, "Read-only file system")
        return real(path, kind, *args, **kwargs)

    monkeypatch.setattr(files, "_new_file", read_only)
    with pytest.raises(ValueError, match="--out .*o.toml: cannot write: Read-only file system"):
        check_writes([Write(str(tmp_path / "o.toml"), "", "--out")], probe=True)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("name", ["n" * 255, "é" * 127 + "x", "a" * 250 + ".toml"])
def test_a_name_at_the_file_systems_limit_is_written_replaced_and_removed(tmp_path, name):
    """The staged copy and the kept original live beside the target under names of their
    own, which stay within the folder's limit however long the target's name is."""
    if len(os.fsencode(name)) > os.pathconf(tmp_path, "PC_NAME_MAX"):
        pytest.skip("this file system takes shorter names")
    target = str(tmp_path / name)
    files.write_files([("--out", target, "first\n")])
    files.write_files([("--out", target, "second\n")])
    assert snapshot(tmp_path) == {name: b"second\n"}
    with Transaction([Write(target, None)]):
        pass
    assert snapshot(tmp_path) == {}
    files.check_outputs([("--out", target)])  # the probe's name fits too
    assert snapshot(tmp_path) == {}
