"""The escape battery: cells written as attacks; each asserts what the OS-level isolation contains.

All attacks share one sandbox (module scope), so each test also checks that the sandbox still answers
afterwards. The claims rest on kernel features; where the kernel here refuses a layer the test that
depends on it is skipped with the reason, and test_sandbox.py pins that all layers are on as root.
"""

from __future__ import annotations

import json
import os
import socket
import uuid
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest
import pytest_asyncio

from r3con.sandbox import Sandbox

pytestmark = pytest.mark.asyncio(loop_scope="module")

CANARY_NAME = "R3CON_TEST_SECRET"
CANARY = f"canary-{uuid.uuid4().hex}"
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run folder like the pipeline's: a secret-bearing calls.jsonl next to the sandbox's scratch root."""
    folder = tmp_path_factory.mktemp("run")
    (folder / "calls.jsonl").write_text(json.dumps({"api_key": CANARY}) + "\n")
    (folder / "calls.jsonl").chmod(0o644)
    folder.chmod(0o755)
    return folder


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def sandbox(run_folder: Path, fast_limits) -> AsyncIterator[Sandbox]:
    with pytest.MonkeyPatch.context() as mp:
        # The canary stays in this process's environment while the battery runs: every restarted
        # worker is started from a parent that holds the secret.
        mp.setenv(CANARY_NAME, CANARY)
        box = Sandbox(variables={"parent_pid": os.getpid(), "canary_name": CANARY_NAME},
                      limits=fast_limits, scratch_root=run_folder / "sandbox")
        await box.start()
        yield box
        await box.close()


async def test_parent_environment_is_not_inherited(sandbox, answers):
    assert os.environ[CANARY_NAME] == CANARY  # the secret is there to be stolen
    result = await sandbox.run(
        "import os\n"
        "print(sorted(os.environ))\n"
        "print(os.environ.get(canary_name))\n"
        "for path in ('/proc/self/environ', '/proc/1/environ'):\n"
        "    try:\n"
        "        print(open(path, 'rb').read())\n"
        "    except OSError as exc:\n"
        "        print(path, type(exc).__name__)\n"
    )
    assert result.error is None, result
    assert CANARY not in result.stdout
    assert CANARY_NAME not in result.stdout.splitlines()[0]
    assert "None" in result.stdout.splitlines()[1]
    await answers(sandbox)


async def test_parent_proc_environ_is_out_of_reach(sandbox, require, answers):
    require(sandbox, "pid_namespace")
    result = await sandbox.run(
        f"try:\n    print(open('/proc/{os.getpid()}/environ', 'rb').read())\n"
        "except OSError as exc:\n    print(type(exc).__name__)\n"
    )
    assert CANARY not in result.stdout
    assert result.stdout.strip() in {"FileNotFoundError", "PermissionError"}, result
    await answers(sandbox)


async def test_proc_shows_only_the_sandbox_processes(sandbox, require, answers):
    require(sandbox, "pid_namespace")
    result = await sandbox.run("import os\nprint(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))")
    pids = json.loads(result.stdout)
    assert os.getpid() not in pids
    assert pids and max(pids) < 100, pids  # the namespace's own, small, PIDs
    await answers(sandbox)


async def test_tcp_connect_to_a_host_listener_never_arrives(sandbox, require, answers):
    require(sandbox, "no_network")
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        listener.setblocking(False)
        port = listener.getsockname()[1]
        result = await sandbox.run(
            "import socket\n"
            "try:\n"
            f"    socket.create_connection(('127.0.0.1', {port}), timeout=1)\n"
            "    print('connected')\n"
            "except OSError as exc:\n"
            "    print('refused', exc.errno)\n"
        )
        assert result.stdout.startswith("refused"), result
        with pytest.raises(BlockingIOError):
            listener.accept()
    await answers(sandbox)


async def test_dns_lookup_fails(sandbox, require, answers):
    require(sandbox, "no_network")
    result = await sandbox.run(
        "import socket\n"
        "try:\n"
        "    print(socket.getaddrinfo('example.com', 443))\n"
        "except socket.gaierror as exc:\n"
        "    print('gaierror')\n"
        "print(socket.if_nameindex())\n"
    )
    lines = result.stdout.splitlines()
    assert lines[0] == "gaierror", result
    assert lines[1] == "[(1, 'lo')]"  # nothing but the namespace's own loopback
    await answers(sandbox)


@pytest.mark.parametrize("where", ["tmp", "dev_shm", "test_tmp_path", "repo", "run_folder"])
async def test_writes_outside_scratch_do_not_land(sandbox, require, answers, where, tmp_path, run_folder):
    require(sandbox, "readonly_fs")
    name = f"escape-{uuid.uuid4().hex}"
    target = {"tmp": Path("/tmp") / name, "dev_shm": Path("/dev/shm") / name, "test_tmp_path": tmp_path / name,
              "repo": REPO / name, "run_folder": run_folder / name}[where]
    result = await sandbox.run(
        f"try:\n    open({str(target)!r}, 'w').write('pwned')\n    print('written')\n"
        "except OSError as exc:\n    print(type(exc).__name__)\n"
    )
    assert result.stdout.strip() in {"FileNotFoundError", "PermissionError", "OSError"}, result
    assert not target.exists()
    await answers(sandbox)


async def test_run_folder_files_are_invisible(sandbox, require, answers, run_folder):
    require(sandbox, "readonly_fs")
    result = await sandbox.run(
        "import os, glob\n"
        "print(os.listdir('..'))\n"
        f"for path in ['../../calls.jsonl', {str(run_folder / 'calls.jsonl')!r}]:\n"
        "    try:\n"
        "        print(open(path).read())\n"
        "    except OSError as exc:\n"
        "        print(type(exc).__name__)\n"
    )
    assert CANARY not in result.stdout
    assert result.stdout.count("FileNotFoundError") == 2, result
    assert "calls.jsonl" not in result.stdout
    await answers(sandbox)


async def test_etc_shadow_is_unreadable(sandbox, require, answers):
    require(sandbox, "unprivileged_uid")
    result = await sandbox.run(
        "try:\n    print(open('/etc/shadow').read())\nexcept OSError as exc:\n    print(type(exc).__name__)\n"
    )
    assert result.stdout.strip() in {"PermissionError", "FileNotFoundError"}, result
    await answers(sandbox)


async def test_shell_commands_run_contained(sandbox, require, answers):
    require(sandbox, "unprivileged_uid", "readonly_fs")
    marker = Path("/tmp") / f"escape-{uuid.uuid4().hex}"
    result = await sandbox.run(
        "import os\n"
        f"status = os.system('id -u; echo secret=${CANARY_NAME}; touch {marker} 2>/dev/null || echo denied')\n"
    )
    lines = result.stdout.splitlines()
    assert lines[0] != "0"  # not root
    assert lines[1] == "secret="
    assert lines[2] == "denied"
    assert not marker.exists()
    await answers(sandbox)


async def test_subprocess_sees_no_secret(sandbox, require, answers):
    require(sandbox, "unprivileged_uid")  # it also reads the parent's /proc/<pid>/environ
    result = await sandbox.run(
        "import subprocess\n"
        f"out = subprocess.run(['sh', '-c', 'env; cat /proc/{os.getpid()}/environ'], capture_output=True, text=True)\n"
        "print(out.stdout)\n"
    )
    assert result.error is None, result
    assert CANARY not in result.stdout
    await answers(sandbox)


async def test_fork_bomb_is_bounded(sandbox, require, answers):
    require(sandbox, "rlimits", "unprivileged_uid")
    result = await sandbox.run(
        "import os, time\n"
        "children = []\n"
        "try:\n"
        "    for _ in range(1000):\n"
        "        pid = os.fork()\n"
        "        if pid == 0:\n"
        "            time.sleep(30)\n"
        "            os._exit(0)\n"
        "        children.append(pid)\n"
        "except OSError as exc:\n"
        "    print('stopped', type(exc).__name__)\n"
        "print(len(children))\n"
        "for pid in children:\n"
        "    os.kill(pid, 9)\n"
        "    os.waitpid(pid, 0)\n"
    )
    lines = result.stdout.splitlines()
    assert lines[0] == "stopped BlockingIOError", result
    assert int(lines[1]) < sandbox.limits.max_processes
    await answers(sandbox)


async def test_fork_bomb_that_ignores_errors_is_killed(sandbox, answers):
    result = await sandbox.run(
        "import os\n"
        "while True:\n"
        "    try:\n"
        "        os.fork()\n"
        "    except OSError:\n"
        "        pass\n"
    )
    assert result.timed_out and result.restarted, result
    await answers(sandbox)


async def test_segfault_through_ctypes_crashes_only_the_worker(sandbox, answers):
    result = await sandbox.run("import ctypes\nctypes.string_at(0)")
    assert result.crashed and result.restarted and not result.timed_out, result
    assert "segmentation fault" in (result.error or "")
    await answers(sandbox)
    rebound = await sandbox.run("print(parent_pid)")
    assert rebound.stdout == f"{os.getpid()}\n"


async def test_os_exit_crashes_only_the_worker(sandbox, answers):
    result = await sandbox.run("import os\nos._exit(3)")
    assert result.crashed and result.restarted, result
    await answers(sandbox)


async def test_huge_allocation_raises_memory_error(sandbox, answers):
    result = await sandbox.run("x = bytearray(10**11)")
    assert result.error is not None and "MemoryError" in result.error, result
    assert not result.crashed
    await answers(sandbox)


async def test_growing_hoard_hits_the_address_space_limit(sandbox, require, answers):
    require(sandbox, "rlimits")
    # bytes(n) maps zeroed pages without touching them: the address-space cap is reached at once.
    result = await sandbox.run("hoard = []\nwhile True:\n    hoard.append(bytes(10**7))")
    assert result.crashed or "MemoryError" in (result.error or ""), result
    assert result.restarted  # the hoard still fills the worker: a fresh one replaces it
    await answers(sandbox)


async def test_memory_bomb_that_touches_its_pages_is_capped(tmp_path, fast_limits, answers):
    # A small cap and a generous timeout: the claim is that the cap, not the clock, stops it.
    limits = replace(fast_limits, memory_mb=600, timeout_s=30.0)
    async with Sandbox(limits=limits, scratch_root=tmp_path) as box:
        if box.isolation.layers["rlimits"] != "on":
            pytest.skip(f"rlimits unavailable here: {box.isolation.layers['rlimits']}")
        result = await box.run("import numpy\nhoard = []\nwhile True:\n    hoard.append(numpy.ones(10**6))")
        assert not result.timed_out, result
        assert result.crashed or "MemoryError" in (result.error or ""), result
        assert result.restarted
        await answers(box)


async def test_cpu_time_is_capped_even_when_the_clock_is_not(tmp_path, fast_limits, answers):
    limits = replace(fast_limits, cpu_s=3, timeout_s=60.0)
    async with Sandbox(limits=limits, scratch_root=tmp_path) as box:
        if box.isolation.layers["rlimits"] != "on":
            pytest.skip(f"rlimits unavailable here: {box.isolation.layers['rlimits']}")
        result = await box.run("import signal\nsignal.signal(signal.SIGXCPU, signal.SIG_IGN)\nwhile True:\n    pass")
        assert result.crashed and result.restarted and not result.timed_out, result
        assert (result.error or "").startswith("WorkerCrashed: the worker died: it was killed")  # SIGKILL at the hard limit
        await answers(box)


async def test_huge_power_is_stopped_by_the_timeout(sandbox, answers):
    result = await sandbox.run("10**10**8")
    assert result.timed_out and result.restarted, result
    await answers(sandbox)


async def test_infinite_loop_is_stopped_by_the_timeout(sandbox, answers):
    result = await sandbox.run("print('before')\nwhile True:\n    pass")
    assert result.timed_out, result
    assert result.stdout == "before\n"  # output before the hang survives
    await answers(sandbox)


async def test_ignoring_signals_does_not_stop_the_timeout(sandbox, answers):
    result = await sandbox.run(
        "import signal, os\n"
        "for sig in (signal.SIGALRM, signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGXCPU):\n"
        "    signal.signal(sig, signal.SIG_IGN)\n"
        "os.setsid() if os.getpid() != os.getsid(0) else None\n"
        "while True:\n"
        "    pass\n"
    )
    assert result.timed_out, result
    await answers(sandbox)


async def test_deep_recursion_is_contained(sandbox, answers):
    plain = await sandbox.run("def f(n):\n    return f(n + 1)\nf(0)")
    assert "RecursionError" in (plain.error or ""), plain
    unbounded = await sandbox.run("import sys\nsys.setrecursionlimit(10**8)\ndef g(n):\n    return g(n + 1)\ng(0)")
    assert unbounded.crashed or unbounded.error, unbounded
    await answers(sandbox)


async def test_printing_100_mb_is_truncated(tmp_path, fast_limits, answers):
    # A generous clock: the claim is that the output is cut, and making 100 MB takes seconds on a busy machine
    # (the battery's 2 s stopped it once under load)
    async with Sandbox(limits=replace(fast_limits, timeout_s=30.0), scratch_root=tmp_path) as box:
        result = await box.run("print('head' + 'x' * 100_000_000 + 'tail')")
        assert result.error is None, result.error
        limit = box.limits.output_chars
        assert len(result.stdout) < limit + 100
        assert result.stdout.startswith("headxxx")
        assert result.stdout.endswith("xxxtail\n")
        assert f"[... {100_000_009 - limit} characters cut ...]" in result.stdout
        await answers(box)


async def test_killing_the_parent_fails(sandbox, require, answers):
    require(sandbox, "unprivileged_uid")
    result = await sandbox.run(
        "import os\n"
        f"for pid in (os.getppid(), {os.getpid()}, 1, -1, 0 if False else -{os.getpgid(0)}):\n"
        "    try:\n"
        "        os.kill(pid, 9)\n"
        "        print(pid, 'sent')\n"
        "    except OSError as exc:\n"
        "        print(pid, type(exc).__name__)\n"
    )
    assert result.error is None, result
    assert f"{os.getpid()} ProcessLookupError" in result.stdout or f"{os.getpid()} PermissionError" in result.stdout
    os.kill(os.getpid(), 0)  # this process (the parent) is alive
    await answers(sandbox)


async def test_ptrace_is_refused(sandbox, require, answers):
    require(sandbox, "unprivileged_uid")
    result = await sandbox.run(
        "import ctypes, os\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        f"for pid in (1, os.getppid(), {os.getpid()}):\n"
        "    print(libc.ptrace(16, pid, None, None), ctypes.get_errno())\n"  # PTRACE_ATTACH
        "for path in ('/proc/1/mem', '/proc/1/environ'):\n"  # the namespace's reaper (or the host's init)
        "    try:\n"
        "        open(path, 'rb').read(1)\n"
        "        print('read', path)\n"
        "    except OSError as exc:\n"
        "        print('refused', type(exc).__name__)\n"
    )
    assert result.error is None, result
    lines = result.stdout.splitlines()
    assert all(line.split()[0] == "-1" for line in lines[:3]), result
    assert lines[3:] == ["refused PermissionError"] * 2, result
    await answers(sandbox)


async def test_rlimits_cannot_be_raised(sandbox, require, answers):
    require(sandbox, "rlimits")
    result = await sandbox.run(
        "import resource\n"
        "for kind in (resource.RLIMIT_AS, resource.RLIMIT_CPU, resource.RLIMIT_NPROC, resource.RLIMIT_NOFILE):\n"
        "    try:\n"
        "        resource.setrlimit(kind, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))\n"
        "        print('raised')\n"
        "    except (ValueError, OSError):\n"
        "        print('refused')\n"
        "print(resource.getrlimit(resource.RLIMIT_AS))\n"
    )
    lines = result.stdout.splitlines()
    assert lines[:4] == ["refused"] * 4, result
    limit = sandbox.limits.memory_mb * 1024 * 1024
    assert lines[4] == f"({limit}, {limit})"
    await answers(sandbox)


async def test_root_cannot_be_regained(sandbox, require, answers):
    require(sandbox, "unprivileged_uid")
    result = await sandbox.run(
        "import os\n"
        "for call in (lambda: os.setuid(0), lambda: os.setgid(0), lambda: os.setgroups([0]),\n"
        "             lambda: os.seteuid(0)):\n"
        "    try:\n"
        "        call()\n"
        "        print('became root')\n"
        "    except OSError:\n"  # EPERM; EINVAL in a user namespace where uid 0 is not even mapped
        "        print('refused')\n"
        "print(os.getresuid())\n"
    )
    lines = result.stdout.splitlines()
    assert lines[:4] == ["refused"] * 4, result
    assert "0" not in lines[4].strip("()").replace(" ", "").split(",")
    await answers(sandbox)


async def test_chmod_and_chown_tricks_fail(sandbox, require, answers):
    require(sandbox, "unprivileged_uid", "readonly_fs")
    result = await sandbox.run(
        "import os, shutil\n"
        "shutil.copy('/bin/sh', 'sh')\n"
        "for call in (lambda: os.chown('sh', 0, 0), lambda: os.chmod('/etc/passwd', 0o666),\n"
        "             lambda: os.chmod('/usr/bin', 0o777), lambda: os.chown('/etc/passwd', os.getuid(), -1)):\n"
        "    try:\n"
        "        call()\n"
        "        print('changed')\n"
        "    except OSError as exc:\n"
        "        print(type(exc).__name__)\n"
        "os.chmod('sh', 0o4755)\n"  # setuid bit on our own copy: useless on a nosuid mount, no_new_privs
        "print(os.popen('./sh -c \"id -u\"').read().strip() != '0')\n"
    )
    lines = result.stdout.splitlines()
    assert "changed" not in lines, result
    assert lines[-1] == "True"
    await answers(sandbox)


async def test_new_user_namespace_cannot_unlock_the_file_system(sandbox, require, answers):
    require(sandbox, "readonly_fs")
    name = f"escape-{uuid.uuid4().hex}"
    result = await sandbox.run(
        "import subprocess\n"
        "out = subprocess.run(['unshare', '-U', '-r', '-m', 'sh', '-c',\n"
        f"    'mount -o remount,rw /usr; mount -o remount,rw /; touch /usr/{name} /{name}; id -u'],\n"
        "    capture_output=True, text=True)\n"
        "print(out.returncode)\n"
    )
    assert result.error is None, result
    assert not (Path("/usr") / name).exists()
    assert not (Path("/") / name).exists()
    await answers(sandbox)


async def test_class_hierarchy_walk_reaches_nothing_useful(sandbox, require, answers, run_folder):
    require(sandbox, "readonly_fs", "no_network")
    result = await sandbox.run(
        "found = None\n"
        "for cls in ().__class__.__base__.__subclasses__():\n"
        "    if cls.__name__ == 'catch_warnings':\n"
        "        found = cls()._module.__builtins__['__import__']('os')\n"
        "print(found is not None)\n"
        "print(found.environ.get(canary_name))\n"
        f"print(found.system('cat {run_folder / 'calls.jsonl'} 2>/dev/null || echo unreadable'))\n"
        "sock = found.popen('python3 -c \"import socket; socket.create_connection((\\'1.1.1.1\\', 53), 1)\" 2>&1 | tail -1')\n"
        "print(sock.read())\n"
    )
    lines = result.stdout.splitlines()
    assert lines[0] == "True", result
    assert lines[1] == "None"
    assert CANARY not in result.stdout
    assert "unreadable" in lines
    assert "OSError" in result.stdout or "unreachable" in result.stdout.lower()
    await answers(sandbox)


async def test_tampering_with_the_protocol_channel_only_restarts(sandbox, answers):
    result = await sandbox.run(
        "import os, stat\n"
        "for fd in range(3, 256):\n"
        "    try:\n"
        "        if stat.S_ISSOCK(os.fstat(fd).st_mode):\n"
        "            os.write(fd, b'\\xff\\xff\\xff\\xffgarbage')\n"
        "    except OSError:\n"
        "        pass\n"
        "import time\ntime.sleep(5)\n"
    )
    assert result.restarted and (result.crashed or result.timed_out), result
    await answers(sandbox)


async def test_closing_the_output_fds_does_not_silence_later_cells(sandbox, answers):
    result = await sandbox.run("import os\nos.close(1)\nos.close(2)\nprint('lost')")
    assert not result.crashed
    await answers(sandbox)


def _processes_of(uid: int) -> list[int]:
    """PIDs on this host whose real uid is `uid`."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                status = (entry / "status").read_text()
            except OSError:
                continue
            line = next(line for line in status.splitlines() if line.startswith("Uid:"))
            if int(line.split()[1]) == uid:
                pids.append(int(entry.name))
    return pids


async def test_shell_fork_bomb_is_bounded_and_dies_with_the_worker(sandbox, require, answers):
    require(sandbox, "rlimits", "unprivileged_uid", "pid_namespace")
    if os.geteuid() != 0:
        pytest.skip("only a root parent gives the sandbox a uid of its own to count processes by")
    uid = int((await sandbox.run("import os\nprint(os.getuid())")).stdout)
    result = await sandbox.run("import os\nos.system('bomb() { bomb | bomb & }; bomb; sleep 60')")
    assert result.timed_out and result.restarted, result
    assert len(_processes_of(uid)) == 1  # the fresh worker; every process of the bomb is gone
    await answers(sandbox)


async def test_subprocess_spawning_stops_at_the_process_limit(sandbox, require, answers):
    require(sandbox, "rlimits", "unprivileged_uid")
    result = await sandbox.run(
        "import subprocess\n"
        "children = []\n"
        "try:\n"
        "    for _ in range(500):\n"
        "        children.append(subprocess.Popen(['sleep', '60']))\n"
        "except OSError as exc:\n"
        "    print('stopped', type(exc).__name__)\n"
        "print(len(children))\n"
        "for child in children:\n"
        "    child.kill()\n"
        "    child.wait()\n"
    )
    lines = result.stdout.splitlines()
    assert lines[0] == "stopped BlockingIOError", result
    assert int(lines[1]) < sandbox.limits.max_processes
    await answers(sandbox)


async def test_open_files_are_limited(sandbox, require, answers):
    require(sandbox, "rlimits")
    result = await sandbox.run(
        "handles = []\n"
        "try:\n"
        "    while True:\n"
        "        handles.append(open('/dev/null'))\n"
        "except OSError as exc:\n"
        "    print(exc.errno, len(handles))\n"
        "for handle in handles:\n"
        "    handle.close()\n"
    )
    errno_, count = map(int, result.stdout.split())
    assert errno_ == 24 and count < sandbox.limits.open_files, result  # EMFILE
    await answers(sandbox)


async def test_file_size_is_limited(sandbox, require, answers):
    require(sandbox, "rlimits")
    result = await sandbox.run(
        "try:\n"
        "    with open('big.bin', 'wb') as fh:\n"
        "        for _ in range(200):\n"
        "            fh.write(b'x' * 2**20)\n"
        "except OSError as exc:\n"
        "    print(exc.errno)\n"
    )
    assert result.stdout.strip() == "27", result  # EFBIG
    assert sandbox.scratch_dir is not None
    assert (sandbox.scratch_dir / "big.bin").stat().st_size <= sandbox.limits.file_size_mb * 2**20
    (sandbox.scratch_dir / "big.bin").unlink()
    await answers(sandbox)


async def test_ctypes_system_calls_are_refused(sandbox, require, answers):
    require(sandbox, "unprivileged_uid", "no_new_privs", "readonly_fs")
    name = f"escape-{uuid.uuid4().hex}"
    result = await sandbox.run(
        "import ctypes, os, socket\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "print(libc.setuid(0), libc.setgid(0))\n"
        "print(libc.unshare(0x40000000 | 0x00020000))\n"  # a network and a mount namespace of its own
        "print(libc.mount(None, b'/', None, 32 | 4096, None))\n"  # MS_REMOUNT | MS_BIND, read-write
        "print(libc.chroot(b'/tmp'))\n"
        f"print(libc.creat(b'/tmp/{name}', 0o644), libc.creat(b'/{name}', 0o644))\n"
        "print(os.getuid() != 0, socket.if_nameindex())\n"
    )
    assert result.error is None, result
    lines = result.stdout.splitlines()
    assert lines[:5] == ["-1 -1", "-1", "-1", "-1", "-1 -1"], result
    if sandbox.isolation.layers["no_network"] == "on":
        assert lines[5] == "True [(1, 'lo')]"
    assert not (Path("/tmp") / name).exists() and not (Path("/") / name).exists()
    await answers(sandbox)


async def test_frame_and_format_string_walks_reach_nothing_useful(sandbox, require, answers, run_folder):
    require(sandbox, "readonly_fs", "unprivileged_uid")
    # CVE-2023-37271 (a generator's frame leads to the real builtins), CVE-2023-41039 and
    # CVE-2024-47532 (str.format reaches attributes a checker never sees), CVE-2025-9959 (dunder
    # chains to a module's globals): in a separate process they give the code only what it has anyway.
    result = await sandbox.run(
        "gen = (x for x in [1])\n"
        "frame = gen.gi_frame.f_back or gen.gi_frame\n"
        "real_builtins = frame.f_globals['__builtins__']\n"
        "os_module = getattr(real_builtins, '__import__', None) or real_builtins['__import__']\n"
        "os_module = os_module('os')\n"
        "print('{0.__class__.__mro__[1].__subclasses__}'.format(()) != '')\n"
        "wrap_close = [c for c in object.__subclasses__() if c.__name__ == '_wrap_close'][0]\n"
        "system = wrap_close.__init__.__globals__['system']\n"
        f"status = system('cat {run_folder / 'calls.jsonl'} /proc/{os.getpid()}/environ 2>/dev/null; echo done')\n"
        "print(os_module.environ.get(canary_name), os_module.getuid() != 0)\n"
    )
    assert result.error is None, result
    assert CANARY not in result.stdout and CANARY not in result.stderr
    assert result.stdout.splitlines() == ["True", "done", "None True"], result
    await answers(sandbox)
