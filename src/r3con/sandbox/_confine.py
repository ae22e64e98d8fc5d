"""Kernel-level confinement of the worker: namespaces, a read-only root, rlimits, privilege drop.

Standard library only: the worker loads this file by path, without importing r3con. Every step
reports into a dict of layer name -> "on" / "off: <reason>"; a step the kernel refuses turns its
layer off and the rest still apply.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import resource
import signal
from collections.abc import Iterable, MutableMapping

CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_NOATIME = 1024
MS_NODIRATIME = 2048
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MS_RELATIME = 1 << 21
MNT_DETACH = 2

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4

_SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "riscv64": 41}

# Devices code may reasonably open; everything else under /dev stays out of the sandbox.
DEVICES = ("null", "zero", "full", "random", "urandom")
SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")

Report = MutableMapping[str, str]

_libc = ctypes.CDLL(None, use_errno=True)


def _call(name: str, *args: object) -> int:
    result = int(getattr(_libc, name)(*args))
    if result == -1:
        code = ctypes.get_errno()
        raise OSError(code, f"{name}: {os.strerror(code)}")
    return result


def _b(value: str | None) -> bytes | None:
    return None if value is None else os.fsencode(value)


def unshare(flags: int) -> None:
    _call("unshare", ctypes.c_int(flags))


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    _call("mount", _b(source), _b(target), _b(fstype), ctypes.c_ulong(flags), _b(data))


def umount2(target: str, flags: int) -> None:
    _call("umount2", _b(target), ctypes.c_int(flags))


def pivot_root(new_root: str, put_old: str) -> None:
    number = _SYS_PIVOT_ROOT.get(platform.machine())
    if number is None:
        raise OSError(errno.ENOSYS, f"pivot_root: unknown syscall number on {platform.machine()}")
    _call("syscall", ctypes.c_long(number), _b(new_root), _b(put_old))


def prctl(option: int, arg: int = 0, arg3: int = 0) -> None:
    _call("prctl", ctypes.c_int(option), ctypes.c_ulong(arg), ctypes.c_ulong(arg3),
          ctypes.c_ulong(0), ctypes.c_ulong(0))


def die_with_parent(expected_parent: int | None) -> None:
    """SIGKILL this process when its parent dies; exit now if the parent is already gone."""
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if expected_parent is not None and os.getppid() != expected_parent:
        os._exit(70)


# -- namespaces -----------------------------------------------------------------------------------


def _write(path: str, text: str) -> None:
    with open(path, "w") as fh:
        fh.write(text)


def enter_namespaces(*, as_root: bool, skip: Iterable[str], report: Report) -> bool:
    """Unshare network, IPC, PID and mount namespaces; returns whether a mount namespace was entered.

    As root the namespaces are created directly. Otherwise a user namespace comes first, which makes
    the others possible without privileges where the kernel allows it. It maps only the caller's own
    uid and gid, to themselves: the worker never appears as root, and the capabilities that creating
    the namespace grants (needed for the mounts) are dropped again before any code runs.
    """
    skip = set(skip)
    if not as_root:
        uid, gid = os.getuid(), os.getgid()
        try:
            unshare(CLONE_NEWUSER)
            _write("/proc/self/setgroups", "deny")
            _write("/proc/self/uid_map", f"{uid} {uid} 1")
            _write("/proc/self/gid_map", f"{gid} {gid} 1")
        except OSError as exc:
            reason = f"off: no user namespace for an unprivileged parent ({exc.strerror})"
            for layer in ("no_network", "ipc_namespace", "pid_namespace", "readonly_fs"):
                report[layer] = "off: skipped on request" if layer in skip else reason
            return False
    wanted = (("no_network", CLONE_NEWNET), ("ipc_namespace", CLONE_NEWIPC), ("pid_namespace", CLONE_NEWPID),
              ("readonly_fs", CLONE_NEWNS))
    mount_ns = False
    for layer, flag in wanted:
        if layer in skip:
            report[layer] = "off: skipped on request"
            continue
        try:
            unshare(flag)
        except OSError as exc:
            report[layer] = f"off: unshare refused ({exc.strerror})"
            continue
        report[layer] = "on"
        mount_ns = mount_ns or flag == CLONE_NEWNS
    return mount_ns


# -- file system ----------------------------------------------------------------------------------


def _mount_flags_of(path: str) -> int:
    """Flags of the mount holding `path` that a bind remount must keep (the kernel locks them)."""
    st = os.statvfs(path).f_flag
    flags = 0
    for st_flag, ms_flag in ((os.ST_NODEV, MS_NODEV), (os.ST_NOEXEC, MS_NOEXEC), (os.ST_NOATIME, MS_NOATIME),
                             (os.ST_NODIRATIME, MS_NODIRATIME), (os.ST_RELATIME, MS_RELATIME)):
        if st & st_flag:
            flags |= ms_flag
    return flags


def _make_target(source: str, target: str) -> None:
    os.makedirs(os.path.dirname(target), mode=0o755, exist_ok=True)
    if os.path.isdir(source):
        os.makedirs(target, mode=0o755, exist_ok=True)
    elif not os.path.exists(target):
        os.close(os.open(target, os.O_CREAT | os.O_WRONLY, 0o644))


def _bind(source: str, target: str, *, writable: bool = False) -> None:
    _make_target(source, target)
    mount(source, target, None, MS_BIND | MS_REC)
    flags = MS_REMOUNT | MS_BIND | MS_NOSUID | _mount_flags_of(target)
    if not writable:
        flags |= MS_RDONLY
    if source.startswith("/oldroot/dev/"):
        mount(None, target, None, flags)
    else:
        mount(None, target, None, flags | MS_NODEV)


def _contains(outer: str, inner: str) -> bool:
    return inner == outer or inner.startswith(outer.rstrip("/") + "/")


def exposed_paths(extra: Iterable[str], scratch: str) -> list[str]:
    """System and interpreter paths the worker needs, without any path nested in another one.

    An interpreter path that holds the scratch dir (a package installed at the top of a run folder,
    say) is left out: exposing it would show the run's other files.
    """
    extra = [p for p in extra if os.path.isabs(p) and not _contains(os.path.normpath(p), scratch)]
    paths = sorted({os.path.normpath(p) for p in (*SYSTEM_PATHS, *extra) if os.path.isabs(p) and os.path.lexists(p)})
    kept: list[str] = []
    for path in paths:
        if not any(_contains(k, path) for k in kept):
            kept.append(path)
    return kept


def build_root(*, expose: Iterable[str], scratch: str, with_proc: bool) -> None:
    """Replace the file system view with a read-only tree of `expose` plus a writable `scratch`.

    The layout follows bubblewrap: a tmpfs at /tmp becomes a staging root, the old root is reachable
    under /oldroot while the new root is filled with bind mounts, then the new root replaces both.
    Only mounts in this (private) mount namespace change; the host never sees them. On failure the
    old view is restored (with a fresh /proc when `with_proc`) and the error re-raised.
    """
    paths = exposed_paths(expose, scratch)
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755")
    try:
        os.mkdir("/tmp/newroot", 0o755)
        os.mkdir("/tmp/oldroot", 0o755)
        mount("tmpfs", "/tmp/newroot", "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755")
        pivot_root("/tmp", "/tmp/oldroot")
    except OSError:
        umount2("/tmp", MNT_DETACH)
        _fresh_proc(with_proc)
        raise
    try:
        _fill_root(paths, scratch, with_proc)
        os.chdir("/newroot")
    except OSError:
        os.chdir("/oldroot")  # back to the original root; the staging tmpfs goes with everything in it
        pivot_root(".", ".")
        umount2(".", MNT_DETACH)
        os.chdir("/")
        _fresh_proc(with_proc)
        raise
    pivot_root(".", ".")
    umount2(".", MNT_DETACH)
    os.chdir("/")
    mount(None, "/", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)


def _fresh_proc(wanted: bool) -> None:
    if wanted:
        try:
            mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        except OSError:
            pass


def _fill_root(paths: list[str], scratch: str, with_proc: bool) -> None:
    for path in paths:
        source, target = "/oldroot" + path, "/newroot" + path
        if os.path.islink(source) and os.path.dirname(path) == "/":
            os.symlink(os.readlink(source), target)
        else:
            _bind(source, target)
    _bind("/oldroot" + scratch, "/newroot" + scratch, writable=True)
    os.makedirs("/newroot/dev", 0o755, exist_ok=True)
    for device in DEVICES:
        if os.path.exists(f"/oldroot/dev/{device}"):
            _bind(f"/oldroot/dev/{device}", f"/newroot/dev/{device}", writable=True)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                         ("stderr", "/proc/self/fd/2")):
        os.symlink(target, f"/newroot/dev/{name}")
    os.makedirs("/newroot/tmp", 0o755, exist_ok=True)
    if with_proc:
        # A fresh procfs of the new PID namespace: only the sandbox's own processes are listed.
        # Container runtimes may forbid it (masked /proc paths); the root is read-only without it too.
        os.makedirs("/newroot/proc", 0o755, exist_ok=True)
        try:
            mount("proc", "/newroot/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        except OSError:
            pass


# -- limits and privileges ------------------------------------------------------------------------


def in_initial_user_namespace() -> bool:
    try:
        with open("/proc/self/uid_map") as fh:
            return fh.read().split() == ["0", "0", "4294967295"]
    except OSError:
        return True


def tasks_of(uid: int) -> int:
    """Processes and threads whose real uid is `uid`, as far as /proc shows them."""
    count = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status") as fh:
                fields = dict(line.split(":", 1) for line in fh if ":" in line)
        except OSError:
            continue
        if int(fields.get("Uid", "-1 ").split()[0]) == uid:
            count += int(fields.get("Threads", "1").strip() or 1)
    return count


def set_rlimits(*, memory_mb: int, cpu_s: int, max_processes: int, file_size_mb: int, open_files: int) -> None:
    """Set soft and hard limits alike, so that code cannot raise them again."""
    mb = 1024 * 1024
    for kind, soft, hard in (
        (resource.RLIMIT_AS, memory_mb * mb, memory_mb * mb),
        # SIGXCPU at the soft limit names the cause; SIGKILL at the hard one if code ignores SIGXCPU.
        (resource.RLIMIT_CPU, cpu_s, cpu_s + 2),
        (resource.RLIMIT_NPROC, max_processes, max_processes),
        (resource.RLIMIT_FSIZE, file_size_mb * mb, file_size_mb * mb),
        (resource.RLIMIT_NOFILE, open_files, open_files),
        (resource.RLIMIT_CORE, 0, 0),
    ):
        resource.setrlimit(kind, (soft, hard))
    # Past RLIMIT_FSIZE a write fails with EFBIG instead of killing the worker.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


def drop_bounding_set() -> None:
    cap = 0
    while True:
        try:
            prctl(PR_CAPBSET_DROP, cap)
        except OSError as exc:
            if exc.errno == errno.EINVAL:
                return
            raise
        cap += 1


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def clear_capabilities() -> None:
    """Empty the effective, permitted, inheritable and ambient capability sets."""
    header = _CapHeader(0x20080522, 0)
    data = (_CapData * 2)()
    _call("capset", ctypes.byref(header), data)
    try:
        prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    except OSError:
        pass  # kernels before 4.3 have no ambient set


def drop_to(uid: int, gid: int) -> None:
    """Become uid/gid for good and check that root cannot be regained."""
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    if os.getresuid() != (uid, uid, uid) or os.getresgid() != (gid, gid, gid) or os.getgroups():
        raise OSError(errno.EPERM, "the uid drop did not take effect")
    try:
        os.setuid(0)
    except PermissionError:
        return
    raise OSError(errno.EPERM, "setuid(0) still succeeds after the uid drop")


def forbid_new_privileges() -> None:
    """No setuid or file-capability gains on exec, and no ptrace or /proc peeking at this process."""
    prctl(PR_SET_NO_NEW_PRIVS, 1)
    prctl(PR_SET_DUMPABLE, 0)
