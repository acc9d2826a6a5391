"""Protobuf for the few packets of a Perfetto trace that are not events: the clock snapshot, the trace
metadata and the track descriptors (a handful per process). Events are written in C
(``_native/pfenc.c``); this is a field writer, no message classes, and needs no protobuf package.

Field numbers are Perfetto's (protos/perfetto/trace/trace_packet.proto, track_event/track_descriptor.proto,
clock_snapshot.proto, chrome/chrome_trace_event.proto).
"""
from __future__ import annotations

import struct

# TracePacket
TRACE_PACKET = 1
TP_CHROME_EVENTS = 5
TP_CLOCK_SNAPSHOT = 6
TP_SEQ_ID = 10
TP_SEQ_FLAGS = 13
TP_TRACK_DESCRIPTOR = 60
SEQ_INCREMENTAL_STATE_CLEARED = 1
# ClockSnapshot
CS_CLOCKS = 1
CS_PRIMARY_TRACE_CLOCK = 2
CLOCK_ID, CLOCK_TS = 1, 2
BUILTIN_CLOCK_REALTIME = 1
BUILTIN_CLOCK_BOOTTIME = 6
# ChromeEventBundle / ChromeMetadata
CEB_METADATA = 2
CM_NAME, CM_JSON_VALUE = 1, 5
# TrackDescriptor
TD_UUID, TD_NAME, TD_PROCESS, TD_THREAD, TD_PARENT, TD_COUNTER = 1, 2, 3, 4, 5, 8
TD_CHILD_ORDERING, TD_SIBLING_ORDER_RANK, TD_DESCRIPTION = 11, 12, 14
CHILD_ORDERING_EXPLICIT = 3
# ProcessDescriptor / ThreadDescriptor
PD_PID, PD_NAME, PD_LABELS = 1, 6, 8
THD_PID, THD_TID, THD_NAME = 1, 2, 5

DESCRIPTOR_SEQUENCE = 1  # the sequence of the packets written here


def varint(v: int) -> bytes:
    v &= (1 << 64) - 1  # negative ints as two's complement, as protobuf writes int32/int64
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def uint(field: int, v: int) -> bytes:
    return varint(field << 3) + varint(int(v))


def sint32(field: int, v: int) -> bytes:
    """An int32 field (negative values sign-extended to 64 bits, as protobuf encodes them)."""
    return uint(field, int(v))


def text(field: int, s: str | bytes) -> bytes:
    data = s.encode("utf-8", "replace") if isinstance(s, str) else bytes(s)
    return varint(field << 3 | 2) + varint(len(data)) + data


def message(field: int, *parts: bytes) -> bytes:
    body = b"".join(parts)
    return varint(field << 3 | 2) + varint(len(body)) + body


def fixed64(field: int, v: int) -> bytes:
    return varint(field << 3 | 1) + struct.pack("<Q", v & ((1 << 64) - 1))


def packet(*parts: bytes, seq: int = DESCRIPTOR_SEQUENCE) -> bytes:
    """One TracePacket (as a Trace's ``packet`` field) on the descriptors' sequence."""
    return message(TRACE_PACKET, uint(TP_SEQ_ID, seq), *parts)


def clock_snapshot(t0: int) -> bytes:
    """The trace's clocks: its times are CLOCK_REALTIME ns (Kineto's epoch times), the primary trace clock."""
    clocks = [message(CS_CLOCKS, uint(CLOCK_ID, clock), uint(CLOCK_TS, t0))
              for clock in (BUILTIN_CLOCK_REALTIME, BUILTIN_CLOCK_BOOTTIME)]
    return packet(message(TP_CLOCK_SNAPSHOT, *clocks, uint(CS_PRIMARY_TRACE_CLOCK, BUILTIN_CLOCK_REALTIME)),
                  uint(TP_SEQ_FLAGS, SEQ_INCREMENTAL_STATE_CLEARED))


def metadata(entries: list[tuple[str, bytes]]) -> bytes:
    """Trace metadata as Chrome metadata (Perfetto's trace processor lists each as ``cr-<name>`` in its
    ``metadata`` table): (name, JSON text) pairs, in order."""
    return packet(message(TP_CHROME_EVENTS, *(message(CEB_METADATA, text(CM_NAME, k), text(CM_JSON_VALUE, v))
                                              for k, v in entries)))


def track_descriptor(uuid: int, *, parent: int | None = None, name: str | None = None,
                     process: tuple[int, str | None, list[str]] | None = None,
                     thread: tuple[int, int, str | None] | None = None, counter: bool = False,
                     description: str | None = None, order: int | None = None, explicit_children: bool = False) -> bytes:
    parts = [uint(TD_UUID, uuid)]
    if parent is not None:
        parts.append(uint(TD_PARENT, parent))
    if name is not None:
        parts.append(text(TD_NAME, name))
    if process is not None:
        pid, pname, labels = process
        body = [sint32(PD_PID, pid)]
        if pname is not None:
            body.append(text(PD_NAME, pname))
        body += [text(PD_LABELS, label) for label in labels]
        parts.append(message(TD_PROCESS, *body))
    if thread is not None:
        pid, tid, tname = thread
        body = [sint32(THD_PID, pid), uint(THD_TID, tid)]
        if tname is not None:
            body.append(text(THD_NAME, tname))
        parts.append(message(TD_THREAD, *body))
    if counter:
        parts.append(message(TD_COUNTER))
    if description:
        parts.append(text(TD_DESCRIPTION, description))
    if explicit_children:
        parts.append(uint(TD_CHILD_ORDERING, CHILD_ORDERING_EXPLICIT))
    if order is not None:
        parts.append(sint32(TD_SIBLING_ORDER_RANK, max(-(1 << 31), min(int(order), (1 << 31) - 1))))
    return packet(message(TP_TRACK_DESCRIPTOR, *parts))
