"""Compiled reading of a sensor_msgs/JointState in CDR bytes (XCDR1, little endian).

The bytes are what rclpy's ``serialize_message`` makes: a 4-byte encapsulation header
(``00 01``) and then the fields, each aligned to its size counted from the end of that header
(strings: uint32 length with the NUL, the bytes, the NUL; sequences: uint32 count, then the
elements, doubles aligned to 8 only when there are any). Fast CDR leaves alignment padding (and
some trailing bytes) uninitialised: the reader never looks at them.

``read_state`` locates the fields, checks that the names are those of the last mapped message
and gathers the model's joints' values; it is a kernel that a node's compiled cycle calls. It
knows the wire layout only, no ROS library: ``robot_dynamics.nodes.common.cdr`` builds its
arrays and falls back to rclpy for anything it declines.
"""
import struct

import numpy as np

from ._jit import jit

OK, NONE, PLAIN = 0, 1, 2           # statuses of the compiled reader
HEADER_STAMP = struct.Struct('<iI')   # std_msgs/Header's stamp, after the encapsulation header
ENCAPSULATION = b'\x00\x01\x00\x00'   # XCDR1, little endian
# info slots: stamp, frame_id (offset, bytes), names (count, offset of the first), then the
# count and offset of the position, velocity and effort arrays
SEC, NANOSEC, FRAME, FRAME_LEN, NAMES, NAMES_AT, COUNTS, OFFSETS = 0, 1, 2, 3, 4, 5, 6, 9
INFO = 12
# cfg slots: mapped (-1 nothing cached, 0 none of our joints, 1 mapped), the name count of the
# mapped message, the three fields wanted (0/1), then the message index of each model joint
MAPPED, COUNT, WANTED, INDEX = 0, 1, 2, 5


@jit
def align(p, size):
    """Offset p rounded up to a multiple of size, counted from the end of the 4-byte header."""
    return 4 + (p - 4 + size - 1) // size * size


@jit
def _u32(buf, p):
    return (np.int64(buf[p]) | np.int64(buf[p + 1]) << 8 | np.int64(buf[p + 2]) << 16
            | np.int64(buf[p + 3]) << 24)


@jit
def string_end(buf, p):
    """Offset after the CDR string whose length field is at p (-1: it runs past the end)."""
    if p + 4 > buf.size:
        return -1
    length = _u32(buf, p)
    end = p + 4 + length
    if end > buf.size or (length > 0 and buf[end - 1] != 0):
        return -1
    return end


@jit
def layout(buf, info):
    """Fill info with where the fields of a serialized JointState are; False if it is not one."""
    if buf.size < 16 or buf[0] != 0 or buf[1] != 1:
        return False
    info[SEC] = _u32(buf, 4) - (_u32(buf, 4) >> 31 << 32)   # int32
    info[NANOSEC] = _u32(buf, 8)
    end = string_end(buf, 12)
    if end < 0:
        return False
    info[FRAME], info[FRAME_LEN] = 16, max(end - 17, 0)
    p = align(end, 4)
    if p + 4 > buf.size:
        return False
    info[NAMES], info[NAMES_AT] = _u32(buf, p), p + 4
    p += 4
    for _ in range(info[NAMES]):
        p = string_end(buf, align(p, 4))
        if p < 0:
            return False
    for f in range(3):
        p = align(p, 4)
        if p + 4 > buf.size:
            return False
        count = info[COUNTS + f] = _u32(buf, p)
        p = align(p + 4, 8) if count else p + 4
        info[OFFSETS + f] = p
        p += 8 * count
        if p > buf.size:
            return False
    return True


@jit
def _same_names(buf, info, ref):
    """Whether the message's names are those of ref (per name: uint32 length, bytes)."""
    p, r = info[NAMES_AT], 0
    for _ in range(info[NAMES]):
        p = align(p, 4)
        end = string_end(buf, p)
        if r + end - p > ref.size:
            return False
        for k in range(p, end):
            if buf[k] != ref[r]:
                return False
            r += 1
        p = end
    return r == ref.size


@jit
def _gather(buf, at, index, out):
    """out[j] = the double at index[j] of the array at offset at; False if one is not finite."""
    values = buf[at:at + 8 * (index.max() + 1)].view(np.float64)
    finite = True
    for j in range(index.size):
        x = out[j] = values[index[j]]
        finite &= x - x == 0.0
    return finite


@jit
def read_state(buf, ref, cfg, out, info):
    """The compiled reader: OK (out filled), NONE (none of our joints) or PLAIN (ask rclpy).

    buf: the message's bytes as uint8; ref, cfg, out, info: ``CdrJointStateReader.arrays``.
    Callable from another compiled function, e.g. a node's whole cycle in one call.
    """
    if not layout(buf, info) or cfg[MAPPED] < 0 or info[NAMES] != cfg[COUNT]:
        return PLAIN
    if not _same_names(buf, info, ref):
        return PLAIN
    if cfg[MAPPED] == 0:
        return NONE
    for f in range(3):
        if info[COUNTS + f] != 0 and info[COUNTS + f] != info[NAMES]:
            return PLAIN
    if info[COUNTS] == 0:
        return PLAIN
    index = cfg[INDEX:]
    for f in range(3):
        if cfg[WANTED + f] and info[COUNTS + f]:
            if not _gather(buf, info[OFFSETS + f], index, out[f]):
                return PLAIN
    return OK
