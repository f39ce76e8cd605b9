"""The one seccomp filter the sandbox installs: what student code has no use for, and could use to
leave data for the next student or to hold memory that no limit counts.

- Kernel keyrings (add_key, request_key, keyctl): keys added to the user keyring of
  `sandbox.user` outlive the process, so one student's code could leave data there for the next
  (every student's process runs as the same user), in any mode, across gradings.
- System V IPC (shared memory, semaphores, message queues): a segment outlives its process, and
  once detached it is in no process's memory, so only a cgroup would count it.
- Sockets of any family but AF_UNIX: data sent over the sandbox's loopback and never read stays
  in the kernel's socket buffers, which a cgroup v1 memory limit does not count (nor does the
  watchdog). Student code needs no network; AF_UNIX (socketpair) stays where a cgroup counts its
  buffers. Where none does (the watchdog keeps the limits), no socket at all: their buffers, and
  a memfd in flight in one (sent and closed), are memory no process shows. On i386 the
  socketcall and ipc multiplexers go too (their arguments are in memory, out of a filter's
  reach). multiprocessing's queues are pipes, which need no socket.
- io_uring, which would run those same operations without their system calls.

Each fails with EPERM, for the system call tables of x86-64 (and its x32 ABI), i386 (which an
x86-64 process can still call) and arm64; every other call, and every other architecture, is
allowed.

bubblewrap loads it from a descriptor (`--seccomp`); in process mode the keeper installs it
(keeper.py, `install_filter`); students' processes forked from a zygote inherit the zygote's.
"""
from __future__ import annotations

import struct

AUDIT_ARCH = {"x86_64": 0xC000003E, "i386": 0x40000003, "aarch64": 0xC00000B7}
KEYRINGS = {"x86_64": (248, 249, 250), "i386": (286, 287, 288), "aarch64": (217, 218, 219)}
SYSV_IPC = {"x86_64": (29, 30, 31, 67, 64, 65, 66, 220, 68, 69, 70, 71),
            "i386": (117, *range(393, 403), 420),          # ipc(2), then the calls of Linux 5.1
            "aarch64": tuple(range(186, 198))}
IO_URING = (425, 426, 427)                                  # the same number in every table
SOCKET = {"x86_64": 41, "i386": 359, "aarch64": 198}
SOCKETPAIR = {"x86_64": 53, "i386": 360, "aarch64": 199}
SOCKETCALL_I386 = 102
AF_UNIX = 1
X32_BIT = 0x40000000                      # x32 calls are x86-64's numbers with this bit set

LD_W_ABS, JEQ_K, AND_K, RET_K = 0x20, 0x15, 0x54, 0x06
SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO, EPERM = 0x7FFF0000, 0x00050000, 1
NR_OFFSET, ARCH_OFFSET, FIRST_ARGUMENT = 0, 4, 16      # in struct seccomp_data (little-endian)


def denied(arch: str, unix_sockets: bool = True) -> tuple[int, ...]:
    """The calls that always fail on `arch` (socket and socketpair too without `unix_sockets`)."""
    extra = (SOCKETCALL_I386,) if arch == "i386" else ()
    sockets = () if unix_sockets else (SOCKET[arch], SOCKETPAIR[arch])
    return (*KEYRINGS[arch], *SYSV_IPC[arch], *IO_URING, *extra, *sockets)


def _program(unix_sockets: bool) -> list[tuple[int, int, int, int]]:
    """(code, jt, jf, k) instructions. Jumps name a label ("deny", "allow", "socket" or an
    architecture); they are resolved to offsets counted from the next instruction."""
    code: list[tuple] = [(LD_W_ABS, None, None, ARCH_OFFSET)]
    code += [(JEQ_K, arch, None, AUDIT_ARCH[arch]) for arch in AUDIT_ARCH]
    code.append((RET_K, None, None, SECCOMP_RET_ALLOW))       # an architecture not known here
    labels = {}
    for arch in AUDIT_ARCH:                                    # load the number, compare, allow
        labels[arch] = len(code)
        code.append((LD_W_ABS, None, None, NR_OFFSET))
        if arch == "x86_64":
            code.append((AND_K, None, None, 0xFFFFFFFF & ~X32_BIT))
        if unix_sockets:
            code.append((JEQ_K, "socket", None, SOCKET[arch]))
        code += [(JEQ_K, "deny", None, number) for number in denied(arch, unix_sockets)]
        code.append((RET_K, None, None, SECCOMP_RET_ALLOW))
    labels["socket"] = len(code)                               # socket(family, ...): AF_UNIX only
    code.append((LD_W_ABS, None, None, FIRST_ARGUMENT))
    code.append((JEQ_K, "allow", "deny", AF_UNIX))
    labels["allow"] = len(code)
    code.append((RET_K, None, None, SECCOMP_RET_ALLOW))
    labels["deny"] = len(code)
    code.append((RET_K, None, None, SECCOMP_RET_ERRNO | EPERM))

    def offset(target, here: int) -> int:
        jump = 0 if target is None else labels[target] - here - 1
        assert 0 <= jump < 256, "a jump too far for classic BPF"
        return jump

    return [(op, offset(jt, here), offset(jf, here), k)
            for here, (op, jt, jf, k) in enumerate(code)]


def student_filter(unix_sockets: bool = True) -> bytes:
    """The filter as bubblewrap's --seccomp reads it: struct sock_filter, one after another.
    `unix_sockets`: whether AF_UNIX sockets are allowed (where a cgroup counts their buffers)."""
    return b"".join(struct.pack("=HBBI", *instruction) for instruction in _program(unix_sockets))
