"""Messages between the trusted grader and the student's process: JSON plus raw tensor bytes.

This file runs on both sides of the boundary (it is copied into the sandbox), so it imports only the
standard library and torch. Nothing is ever unpickled: a message is a JSON header and a list of
byte buffers, each read back as a tensor of an allowed dtype whose size must match its shape.
"""
import json
import math
import os
import select
import struct
import time

import torch

MAX_HEADER = 16 * 1024 * 1024
MAX_PAYLOAD = 512 * 1024 * 1024          # what the student's side accepts from the grader
REPLY_LIMIT = 8 * 1024 * 1024            # what the grader accepts from student code: a reply
# The grader imports this file as tfcourse.sandbox.channel; the sandbox runs a copy of it as
# `channel`. Each side receives with its own limit unless it passes another.
TRUSTED = __name__.startswith("tfcourse.")
RECEIVE_LIMIT = REPLY_LIMIT if TRUSTED else MAX_HEADER + MAX_PAYLOAD
MAX_DEPTH = 32
MAX_TENSORS = 1 << 16
_FRAME = struct.Struct("!QQ")

DTYPES = {
    "float32": torch.float32, "float64": torch.float64, "float16": torch.float16,
    "bfloat16": torch.bfloat16, "int64": torch.int64, "int32": torch.int32,
    "int16": torch.int16, "int8": torch.int8, "uint8": torch.uint8, "bool": torch.bool,
}
_NAMES = {dtype: name for name, dtype in DTYPES.items()}


class ChannelError(Exception):
    """The other side sent something that is not a well-formed message, or went away."""


class ChannelTimeout(ChannelError):
    """No complete message arrived before the deadline."""


class TooLarge(ChannelError):
    """A message larger than the receiver accepts; none of it was read past its frame, so the
    channel is out of step: end the other side."""

    def __init__(self, size: int, limit: int, part: str = ""):
        noun = "reply" if TRUSTED else "message"
        super().__init__(f"the {noun}{part} was {_megabytes(size)} MB; at most "
                         f"{_megabytes(limit)} MB")
        self.size, self.limit = size, limit


def _megabytes(size: int) -> str:
    """A size in MB as a person reads it, rounded up (8.01 MB is not "8 MB")."""
    tenths = math.ceil(size * 10 / 1048576)
    return f"{tenths // 10}" if tenths % 10 == 0 else f"{tenths / 10:.1f}"


def _encode(value, buffers, depth=0):
    if depth > MAX_DEPTH:
        raise ValueError("value nested too deeply to send")
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {"__float__": repr(value)}
    if isinstance(value, torch.Tensor):
        tensor = value.detach().to("cpu")
        if tensor.is_complex() or tensor.layout != torch.strided:
            raise ValueError(f"cannot send a tensor of dtype {tensor.dtype}, "
                             f"layout {tensor.layout}")
        if tensor.dtype not in _NAMES:
            tensor = tensor.to(torch.float64 if tensor.is_floating_point() else torch.int64)
        tensor = tensor.contiguous()
        data = tensor.reshape(-1).view(torch.uint8).numpy().tobytes() if tensor.numel() else b""
        buffers.append(data)
        return {"__tensor__": len(buffers) - 1, "dtype": _NAMES[tensor.dtype],
                "shape": list(tensor.shape)}
    if isinstance(value, (list, tuple)):
        items = [_encode(item, buffers, depth + 1) for item in value]
        return items if isinstance(value, list) else {"__tuple__": items}
    if isinstance(value, dict):
        if not all(isinstance(key, str) for key in value):
            raise ValueError("only dicts with string keys can be sent")
        return {"__dict__": {key: _encode(item, buffers, depth + 1) for key, item in value.items()}}
    raise ValueError(f"cannot send a value of type {type(value).__name__}")


def _decode(value, buffers, depth=0):
    if depth > MAX_DEPTH:
        raise ChannelError("message nested too deeply")
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, list):
        return [_decode(item, buffers, depth + 1) for item in value]
    if not isinstance(value, dict):
        raise ChannelError("malformed message")
    if "__tensor__" in value:
        return _tensor(value, buffers)
    if "__tuple__" in value and isinstance(value["__tuple__"], list):
        return tuple(_decode(item, buffers, depth + 1) for item in value["__tuple__"])
    if "__float__" in value and value["__float__"] in ("nan", "inf", "-inf"):
        return float(value["__float__"])
    if "__dict__" in value and isinstance(value["__dict__"], dict):
        return {str(k): _decode(item, buffers, depth + 1) for k, item in value["__dict__"].items()}
    raise ChannelError("malformed message")


def _tensor(spec, buffers):
    """A tensor over its buffer (a bytearray of its own, used once): no copy is made."""
    index, dtype, shape = spec.get("__tensor__"), spec.get("dtype"), spec.get("shape")
    if not isinstance(index, int) or not 0 <= index < len(buffers) or dtype not in DTYPES:
        raise ChannelError("malformed tensor in message")
    if not isinstance(shape, list) or len(shape) > 16 or not all(
            isinstance(n, int) and not isinstance(n, bool) and 0 <= n for n in shape):
        raise ChannelError("malformed tensor shape in message")
    dtype = DTYPES[dtype]
    count = math.prod(shape)
    data, buffers[index] = buffers[index], None      # one tensor per buffer: none share memory
    if data is None:
        raise ChannelError("malformed tensor in message")
    if len(data) != count * torch.empty((), dtype=dtype).element_size():
        raise ChannelError("tensor size does not match its shape")
    if count == 0:
        return torch.empty(shape, dtype=dtype)
    return torch.frombuffer(data, dtype=dtype).reshape(shape)


def pack(message: dict) -> bytes:
    buffers: list[bytes] = []
    header = json.dumps({"body": _encode(message, buffers),
                         "sizes": [len(b) for b in buffers]}).encode()
    return _FRAME.pack(len(header), sum(len(b) for b in buffers)) + header + b"".join(buffers)


def send(fd: int, message: dict) -> None:
    data = memoryview(pack(message))
    while data:
        written = os.write(fd, data)
        data = data[written:]


def _read_into(fd: int, buffer: bytearray, deadline: float | None) -> None:
    """Fill `buffer` from `fd`, in place."""
    view, filled = memoryview(buffer), 0
    try:
        while filled < len(buffer):
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ChannelTimeout("timed out")
                ready, _, _ = select.select([fd], [], [], left)
                if not ready:
                    raise ChannelTimeout("timed out")
            count = os.readv(fd, [view[filled:filled + (1 << 20)]])
            if not count:
                raise ChannelError("the other side closed the channel")
            filled += count
    finally:
        view.release()


def _read_exactly(fd: int, count: int, deadline: float | None) -> bytearray:
    buffer = bytearray(count)
    _read_into(fd, buffer, deadline)
    return buffer


def recv(fd: int, timeout: float | None = None, max_bytes: int | None = None) -> dict:
    """The next message from `fd`. `max_bytes` (by default RECEIVE_LIMIT: REPLY_LIMIT in the
    grader) caps header and tensors together: a larger message raises TooLarge before any of it
    is read. Each tensor's bytes are read once, into a buffer of their own that the tensor uses."""
    limit = RECEIVE_LIMIT if max_bytes is None else max_bytes
    deadline = None if timeout is None else time.monotonic() + timeout
    header_size, payload_size = _FRAME.unpack(_read_exactly(fd, _FRAME.size, deadline))
    if header_size > MAX_HEADER or payload_size > MAX_PAYLOAD or \
            header_size + payload_size > limit:
        raise TooLarge(header_size + payload_size, limit)
    header_limit = max(limit // 8, 1 << 16)      # JSON grows tenfold and more once parsed
    if header_size > header_limit:
        raise TooLarge(header_size, header_limit, " without its tensors")
    try:
        header = json.loads(_read_exactly(fd, header_size, deadline))
    except (ValueError, RecursionError, MemoryError):
        raise ChannelError("message header is not valid JSON") from None
    sizes = header.get("sizes") if isinstance(header, dict) else None
    if not isinstance(sizes, list) or len(sizes) > MAX_TENSORS \
            or not all(isinstance(n, int) and n >= 0 for n in sizes) or sum(sizes) != payload_size:
        raise ChannelError("malformed message sizes")
    buffers = []
    for size in sizes:
        buffers.append(_read_exactly(fd, size, deadline))
    try:
        body = _decode(header.get("body"), buffers)
    except RecursionError:
        raise ChannelError("message nested too deeply") from None
    if not isinstance(body, dict):
        raise ChannelError("a message must be a mapping")
    return body
