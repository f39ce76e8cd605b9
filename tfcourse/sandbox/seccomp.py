"""The one seccomp filter the sandbox installs: no kernel keyrings for student code.

Keys added with add_key(2) to the user keyring of `sandbox.user` outlive the process that added
them, so one student's code could leave data there for the next (every student's process runs as
the same user), in any mode, across gradings. The filter makes add_key, request_key and keyctl
fail with EPERM, for the system call tables of x86-64 (and its x32 ABI), i386 (which an x86-64
process can still call) and arm64; every other call, and every other architecture, is allowed.

bubblewrap loads it from a descriptor (`--seccomp`); in process mode the keeper installs it
(keeper.py, `install_filter`); students' processes forked from a zygote inherit the zygote's.
"""
from __future__ import annotations

import struct

AUDIT_ARCH = {"x86_64": 0xC000003E, "i386": 0x40000003, "aarch64": 0xC00000B7}
# add_key, request_key, keyctl in each architecture's table
KEY_CALLS = {"x86_64": (248, 249, 250), "i386": (286, 287, 288), "aarch64": (217, 218, 219)}
X32_BIT = 0x40000000                      # x32 calls are x86-64's numbers with this bit set

LD_W_ABS, JEQ_K, AND_K, RET_K = 0x20, 0x15, 0x54, 0x06
SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO, EPERM = 0x7FFF0000, 0x00050000, 1
ARCH_OFFSET, NR_OFFSET = 4, 0            # in struct seccomp_data


def _program() -> list[tuple[int, int, int, int]]:
    """(code, jt, jf, k) instructions; jumps are counted from the next instruction."""
    arches = list(KEY_CALLS)
    body: list[list[tuple]] = []
    for arch in arches:                   # for each: load the number, compare, allow
        block = [(LD_W_ABS, 0, 0, NR_OFFSET)]
        if arch == "x86_64":
            block.append((AND_K, 0, 0, 0xFFFFFFFF & ~X32_BIT))
        block += [("deny?", number) for number in KEY_CALLS[arch]]
        block.append((RET_K, 0, 0, SECCOMP_RET_ALLOW))
        body.append(block)
    head = [(LD_W_ABS, 0, 0, ARCH_OFFSET)]
    dispatch = [("arch?", AUDIT_ARCH[arch], index) for index, arch in enumerate(arches)]
    dispatch.append((RET_K, 0, 0, SECCOMP_RET_ALLOW))        # an architecture not known here
    starts, position = [], len(head) + len(dispatch)
    for block in body:
        starts.append(position)
        position += len(block)
    deny = position
    program = list(head)
    for item in dispatch:
        here = len(program)
        if item[0] == "arch?":
            program.append((JEQ_K, starts[item[2]] - here - 1, 0, item[1]))
        else:
            program.append(item)
    for block in body:
        for item in block:
            here = len(program)
            program.append((JEQ_K, deny - here - 1, 0, item[1]) if item[0] == "deny?" else item)
    program.append((RET_K, 0, 0, SECCOMP_RET_ERRNO | EPERM))
    return program


def keyring_filter() -> bytes:
    """The filter as bubblewrap's --seccomp reads it: struct sock_filter, one after another."""
    return b"".join(struct.pack("=HBBI", *instruction) for instruction in _program())
