"""Recording files: finding, reading and rewriting what `ctrlhost run --record` writes.

A recording file is the 8 bytes b"CTRLREC\\n", one pb.RecordingHeader, then pb.ReconcileRecords,
every message preceded by its length as a base-128 varint (protobuf's "delimited" framing). One
controller's files share a directory and are named 00000001.ctrlrec, 00000002.ctrlrec, ...; read
in name order they give the records in the order the answers arrived. plugin.proto (its end) is
the authority on the messages; runtime/controller/record/recording.h is the host's reader, and
the error messages here are the same as its.

    files = find_recording("testdata/recording", "greeter")
    for path in files:
        recording = read_recording(path)        # RecordingError: names the file and offset
        for offset, record, _ in recording.records:
            ...

Every error is a RecordingError whose message names the file and, for a record, the byte offset
where its length prefix starts.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import List, NamedTuple, Optional, Sequence, Tuple

from google.protobuf.message import DecodeError

from ctrlhost_sdk._proto import pb

MAGIC = b"CTRLREC\n"
# The format this code reads and writes (RecordingHeader.format).
FORMAT = 1
# A frame claiming more is refused as corrupt (a request and an answer are 64 MiB at most).
MAX_RECORD_BYTES = 256 << 20
SUFFIX = ".ctrlrec"
_MAX_VARINT_BYTES = 10


class RecordingError(Exception):
    """A recording that cannot be found or read; the message names the file (and offset)."""


class Entry(NamedTuple):
    """One record of a file: where its length prefix starts, the record, and its bytes."""
    offset: int
    record: pb.ReconcileRecord
    body: bytes


class RecordingFile:
    """One recording file, read whole. `start` is its magic and framed header, byte for byte (a
    rewrite keeps them as they were)."""

    def __init__(self, path: str, header: pb.RecordingHeader, start: bytes,
                 records: List[Entry]) -> None:
        self.path = path
        self.header = header
        self.start = start
        self.records = records


def file_index(path: str) -> Optional[int]:
    """The index of a file named like 00000042.ctrlrec (42); None for any other name."""
    name = os.path.basename(path)
    if not name.endswith(SUFFIX):
        return None
    digits = name[:-len(SUFFIX)]
    if len(digits) < 8 or not (digits.isascii() and digits.isdigit()):
        return None
    return int(digits)


def recording_files(directory: str) -> List[str]:
    """The recording files in `directory`, by index; RecordingError when there are none."""
    if not os.path.exists(directory):
        raise RecordingError("%s: no such directory" % directory)
    if not os.path.isdir(directory):
        raise RecordingError("%s: not a directory" % directory)
    found = sorted((index, os.path.join(directory, name)) for name in os.listdir(directory)
                   for index in [file_index(name)] if index is not None)
    if not found:
        raise RecordingError("%s: holds no recording files (*%s)" % (directory, SUFFIX))
    return [path for _, path in found]


def _controller_dirs(path: str) -> List[str]:
    """The subdirectories of `path` that hold recording files, by name."""
    names = []
    for name in sorted(os.listdir(path)):
        sub = os.path.join(path, name)
        if os.path.isdir(sub) and any(file_index(n) is not None for n in os.listdir(sub)):
            names.append(name)
    return names


def find_recording(path: str, controller: Optional[str]) -> List[str]:
    """The files to replay: `path` itself when it is a file; else the recording files of the
    directory `path`; else those of its subdirectory named `controller` (one subdirectory per
    controller). Without `controller`, a directory of subdirectories must hold exactly one."""
    if os.path.isfile(path):
        return [path]
    if not os.path.isdir(path) or any(file_index(n) is not None for n in os.listdir(path)):
        return recording_files(path)
    controllers = _controller_dirs(path)
    found = "found: " + ", ".join(controllers) if controllers else "none"
    if controller:
        if controller not in controllers:
            raise RecordingError("%s: holds no recording of controller %s (%s)"
                                 % (path, controller, found))
        return recording_files(os.path.join(path, controller))
    if len(controllers) != 1:
        if not controllers:
            raise RecordingError("%s: holds no recording files (*%s), directly or per controller"
                                 % (path, SUFFIX))
        raise RecordingError("%s: holds recordings of several controllers (%s): name one"
                             % (path, found))
    return recording_files(os.path.join(path, controllers[0]))


def _read_frame(path: str, data: bytes, offset: int, what: str) -> Tuple[Optional[bytes], int]:
    """The message framed at `offset` and the offset after it; (None, offset) at the end."""
    size, shift, pos = 0, 0, offset
    while True:
        if pos == len(data):
            if pos == offset:
                return None, pos
            # The length runs past the end: at least one more byte was wanted.
            raise RecordingError("%s: %s at offset %d is cut short (%d of %d bytes): the "
                                 "recording was interrupted" % (path, what, offset, pos - offset,
                                                                pos - offset + 1))
        byte = data[pos]
        pos += 1
        size |= (byte & 0x7F) << shift
        if not byte & 0x80:
            break
        shift += 7
        if pos - offset == _MAX_VARINT_BYTES:
            raise RecordingError("%s: %s at offset %d has a malformed length"
                                 % (path, what, offset))
    if size > MAX_RECORD_BYTES:
        raise RecordingError("%s: %s at offset %d claims %d bytes, more than the limit of %d "
                             "bytes: the file is corrupt" % (path, what, offset, size,
                                                              MAX_RECORD_BYTES))
    prefix = pos - offset
    if pos + size > len(data):
        raise RecordingError("%s: %s at offset %d is cut short (%d of %d bytes): the recording "
                             "was interrupted" % (path, what, offset, len(data) - offset,
                                                  prefix + size))
    return data[pos:pos + size], pos + size


def _read_header(path: str, data: bytes) -> Tuple[pb.RecordingHeader, int]:
    if data[:len(MAGIC)] != MAGIC:
        raise RecordingError("%s: not a ctrlhost recording (no CTRLREC magic at offset 0)" % path)
    body, end = _read_frame(path, data, len(MAGIC), "header")
    if body is None:
        raise RecordingError("%s: ends before its header at offset %d: the recording was "
                             "interrupted" % (path, len(MAGIC)))
    try:
        header = pb.RecordingHeader.FromString(body)
    except DecodeError:
        raise RecordingError("%s: the header at offset %d is not a valid RecordingHeader"
                             % (path, len(MAGIC))) from None
    if header.format > FORMAT:
        raise RecordingError("%s: recording format %d is newer than this reader (it reads "
                             "format %d)" % (path, header.format, FORMAT))
    return header, end


def read_recording(path: str) -> RecordingFile:
    """Reads the file at `path` whole; RecordingError names what is wrong and where."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise RecordingError("%s: cannot open: %s" % (path, e.strerror or e)) from None
    header, offset = _read_header(path, data)
    start = data[:offset]
    records: List[Entry] = []
    while True:
        body, end = _read_frame(path, data, offset, "record")
        if body is None:
            return RecordingFile(path, header, start, records)
        try:
            records.append(Entry(offset, pb.ReconcileRecord.FromString(body), body))
        except DecodeError:
            raise RecordingError("%s: record at offset %d is not a valid ReconcileRecord"
                                 % (path, offset)) from None
        offset = end


def frame(message: bytes) -> bytes:
    """`message` preceded by its length as a base-128 varint."""
    size = len(message)
    prefix = bytearray()
    while True:
        low = size & 0x7F
        size >>= 7
        if size:
            prefix.append(low | 0x80)
        else:
            prefix.append(low)
            return bytes(prefix) + message


def encode_recording(start: bytes, bodies: Sequence[bytes]) -> bytes:
    """A file's bytes: `start` (the magic and framed header) and the framed records."""
    return start + b"".join(frame(body) for body in bodies)


def replace_file(path: str, data: bytes) -> None:
    """Writes `data` to a temporary file beside `path` (same mode), then renames it over
    `path`: a reader sees the old file or the new one, never half of one."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, temp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp",
                                dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        shutil.copymode(path, temp)
        os.replace(temp, path)
    except BaseException:
        if os.path.exists(temp):
            os.unlink(temp)
        raise
