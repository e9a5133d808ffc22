"""What a command writes: never over its own input, and whole or not at all.

    check_apart(out, [data, spec], flag="--out")      # refused in one line when out is one of the inputs
    with new_file("scores.csv", newline="") as f:     # a temporary file beside it, renamed into place
        f.write(...)
    with new_folder("export/din/1") as scratch:        # a version folder that appears complete, or never
        write_saved_model(scratch)
    with replacing_folder("run/preset") as scratch:    # a folder swapped whole: readers see the old or the new
        write_preset(scratch)

A temporary file or folder is named after its target and this process (`.<name>.tmp-<pid>`); one left by
a killed process (its pid no longer runs) is removed by the next write of the same target.
"""

import contextlib
import ctypes
import errno
import glob
import os
import shutil
from pathlib import Path

from zoo.errors import ZooError


def _identity(path):
    status = os.stat(path)
    return status.st_dev, status.st_ino


def _inside(path, folder):
    path, folder = os.path.realpath(path), os.path.realpath(folder)
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _expanded(inputs):
    """Every existing input path; a glob pattern (a reader's `logs/*.csv`) stands for the paths it matches."""
    for given in inputs:
        if given is None:
            continue
        given = os.fspath(given)
        if os.path.exists(given):
            yield given
        elif any(c in given for c in "*?["):
            yield from glob.glob(given)


def _files(path):
    """`path` itself, or every file under a folder."""
    if not os.path.isdir(path):
        yield path
        return
    for folder, _, names in os.walk(path):
        for name in names:
            yield os.path.join(folder, name)


def fingerprint(inputs):
    """[(real path, size, modification time in ns)] of every file of `inputs` (files, folders or globs),
    sorted: what a kept result computed from them depends on (a changed or replaced file changes it)."""
    found = set()
    for given in _expanded(inputs):
        for path in _files(given):
            status = os.stat(path)
            found.add((os.path.realpath(path), status.st_size, status.st_mtime_ns))
    return sorted(found)


def check_apart(output, inputs, *, flag="--out", folder=False):
    """Refuses in one line an `output` that would write over one of the command's `inputs` (files, folders
    or globs), whatever its spelling (relative, ./x, a symbolic or hard link). A file output (`folder=False`)
    may not be an input file or a file inside an input folder; a folder output (written into or replaced
    whole) may not hold an input, nor lie inside an input folder."""
    inputs = list(_expanded(inputs))
    if folder:
        for given in inputs:
            if _inside(given, output) or _inside(output, given):
                where = "is" if _inside(output, given) and _inside(given, output) else (
                    "holds" if _inside(given, output) else "is inside")
                raise ZooError(f"{flag} {output} {where} {given}, which the command reads: write to another folder")
        return
    if not os.path.exists(output) or os.path.isdir(output):
        return  # a new file is no input (a folder is refused when it is opened)
    written = _identity(output)
    for given in inputs:
        for path in _files(given):
            if os.path.exists(path) and _identity(path) == written:
                read = given if path == given else f"{path} (in {given})"
                raise ZooError(f"{flag} {output} is {read}, which the command reads: write to another file")


def _temporary(target):
    """The temporary name of `target` for this process."""
    return target.with_name(f".{target.name}.tmp-{os.getpid()}")


def _remove_stale(target):
    """Removes the temporary files or folders of `target` that killed processes left."""
    for leftover in target.parent.glob(f".{glob.escape(target.name)}.tmp-*"):
        pid = leftover.name.rsplit("-", 1)[1]
        if not pid.isdigit() or _running(int(pid)):
            continue
        with contextlib.suppress(OSError):
            _remove(leftover)


def _running(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True


def _named(error, target):
    """`error` naming the target (a failed write names no file, or the temporary one)."""
    if isinstance(error, OSError) and (error.filename is None or ".tmp-" in str(error.filename)):
        error.filename = str(target)
    return error


def _remove(path):
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    elif path.exists() or path.is_symlink():
        path.unlink()


@contextlib.contextmanager
def new_file(path, binary=False, **options):
    """`path` opened for writing (`binary`: in bytes) through a temporary file beside it, renamed into place when the block ends:
    a write that fails (a full disk, a size limit) or a killed process leaves the target as it was, and
    the failure is an OSError naming `path`. A symbolic link is written through (its target is replaced);
    a device (/dev/null, /dev/full) is written in place."""
    target = Path(os.path.realpath(path))
    if target.exists() and not target.is_file():
        try:
            with open(path, "wb" if binary else "w", **options) as stream:  # a device or a folder (refused by open)
                yield stream
        except OSError as error:
            error.filename = error.filename or str(path)
            raise
        return
    _remove_stale(target)
    temporary = _temporary(target)
    try:
        with open(temporary, "wb" if binary else "w", **options) as stream:
            yield stream
        os.replace(temporary, target)
    except BaseException as error:
        with contextlib.suppress(OSError):
            _remove(temporary)
        raise _named(error, path)


@contextlib.contextmanager
def new_folder(path):
    """A temporary folder beside `path`, renamed to `path` when the block ends: `path` appears complete or not
    at all. `path` must be new or an empty folder; a temporary folder of a killed process is removed first,
    one another live process is writing refuses this one, and the final rename never merges into a folder
    that filled meanwhile. A failure removes the temporary folder."""
    target = Path(os.path.abspath(path))
    target.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale(target)
    others = [p.name for p in target.parent.glob(f".{glob.escape(target.name)}.tmp-*")]
    if others:
        raise ZooError(f"{path}: another process is writing it ({target.parent / others[0]}); wait for it or pick "
                       "a new version number")
    refuse_filled(path)
    temporary = _temporary(target)
    temporary.mkdir()
    try:
        yield temporary
        try:
            os.rename(temporary, target)  # replaces an empty folder; refused over a filled one
        except OSError as error:
            if error.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR):
                raise ZooError(f"{path}: the version directory was filled meanwhile; pick a new version "
                               "number") from None
            raise
    except BaseException as error:
        shutil.rmtree(temporary, ignore_errors=True)
        raise _named(error, path)


def refuse_filled(path):
    """Refuses a version folder `path` that exists and is not an empty folder."""
    target = Path(path)
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise ZooError(f"{path}: the version directory is not empty; pick a new version number")


def _exchange(a, b):
    """Swaps two paths in one step (Linux's renameat2 with RENAME_EXCHANGE); False where the system cannot."""
    function = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
    if function is None:
        return False
    at_current_folder, rename_exchange = -100, 2
    if function(at_current_folder, os.fsencode(a), at_current_folder, os.fsencode(b), rename_exchange) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), str(b))


def _carry_over(old, new, owned):
    """Hard-links (or copies) into `new` what `old` holds and `new` does not, but for the `owned` names: the
    files a user keeps beside the writer's own."""
    for entry in old.iterdir():
        if entry.name in owned or (new / entry.name).exists():
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.copytree(entry, new / entry.name, symlinks=True, copy_function=_link_or_copy)
        else:
            _link_or_copy(entry, new / entry.name)


def _link_or_copy(source, destination):
    try:
        os.link(source, destination, follow_symlinks=False)
    except OSError:
        shutil.copy2(source, destination, follow_symlinks=False)


@contextlib.contextmanager
def replacing_folder(path, *, owned=()):
    """A temporary folder beside `path` that takes the place of `path` whole when the block ends, so that a
    reader sees either the old folder or the new one, never a mix (a rewritten preset: new config, old
    weights). Entries of the old folder the new one lacks are carried over, except the `owned` names (the
    writer's own files, which it left out on purpose). The swap is one atomic exchange on Linux; elsewhere
    the old folder is renamed aside first. A failure removes the temporary folder and leaves `path` as it
    was; a symbolic link is written through."""
    target = Path(os.path.realpath(path))
    target.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale(target)
    temporary = _temporary(target)
    temporary.mkdir()
    try:
        yield temporary
        if target.is_dir():
            _carry_over(target, temporary, owned)
            if not _exchange(temporary, target):
                aside = target.with_name(f".{target.name}.old-{os.getpid()}")
                os.rename(target, aside)
                try:
                    os.rename(temporary, target)
                except OSError:
                    os.rename(aside, target)
                    raise
                temporary = aside
            shutil.rmtree(temporary, ignore_errors=True)  # (now the old folder)
        else:
            os.rename(temporary, target)
    except BaseException as error:
        shutil.rmtree(temporary, ignore_errors=True)
        raise _named(error, path)

