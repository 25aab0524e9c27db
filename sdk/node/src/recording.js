// @ts-check
'use strict';
// Recording files: finding, reading and rewriting what `ctrlhost run --record` writes.
//
// A recording file is the 8 bytes "CTRLREC\n", one RecordingHeader, then ReconcileRecords, every
// message preceded by its length as a base-128 varint (protobuf's "delimited" framing). One
// controller's files share a directory and are named 00000001.ctrlrec, 00000002.ctrlrec, ...;
// read in name order they give the records in the order the answers arrived. plugin.proto (its
// end) is the authority on the messages; runtime/controller/record/recording.h is the host's
// reader, and the error messages here are the same as its.
//
//   for (const file of findRecording('testdata/recording', 'greeter')) {
//     const recording = readRecording(file); // RecordingError: names the file and offset
//     for (const { offset, record } of recording.records) { ... }
//   }
//
// Messages are in the object form grpc-js gives (proto.js LOADER_OPTIONS: field names as
// written, enums by name, uint64 as strings, bytes as Buffers). Every error is a RecordingError
// whose message names the file and, for a record, the byte offset where its length starts.

const fs = require('node:fs');
const path = require('node:path');
const protobuf = require('protobufjs');
const { loadProtocolRoot, LOADER_OPTIONS } = require('./proto');

const MAGIC = Buffer.from('CTRLREC\n', 'latin1');
/** The format this code reads and writes (RecordingHeader.format). */
const FORMAT = 1;
/** A frame claiming more is refused as corrupt (a request and an answer are 64 MiB at most). */
const MAX_RECORD_BYTES = 256 * 1024 * 1024;
const SUFFIX = '.ctrlrec';
const MAX_VARINT_BYTES = 10;

/** A recording that cannot be found or read; the message names the file (and offset). */
class RecordingError extends Error {
  /** @param {string} message */
  constructor(message) {
    super(message);
    this.name = 'RecordingError';
  }
}

/** The protobufjs types of the recording messages. */
function types() {
  const root = loadProtocolRoot();
  return {
    header: root.lookupType('ctrlhost.plugin.v1alpha1.RecordingHeader'),
    record: root.lookupType('ctrlhost.plugin.v1alpha1.ReconcileRecord'),
    response: root.lookupType('ctrlhost.plugin.v1alpha1.ReconcileResponse'),
  };
}

/**
 * The index of a file named like 00000042.ctrlrec (42); null for any other name.
 * @param {string} file
 */
function fileIndex(file) {
  const m = /^(\d{8,})\.ctrlrec$/.exec(path.basename(file));
  return m ? Number(m[1]) : null;
}

/**
 * The recording files in `dir`, by index; RecordingError when there are none.
 * @param {string} dir
 * @returns {string[]}
 */
function recordingFiles(dir) {
  if (!fs.existsSync(dir)) throw new RecordingError(`${dir}: no such directory`);
  if (!fs.statSync(dir).isDirectory()) throw new RecordingError(`${dir}: not a directory`);
  const found = fs.readdirSync(dir).filter((name) => fileIndex(name) !== null)
    .sort((a, b) => Number(fileIndex(a)) - Number(fileIndex(b)) || (a < b ? -1 : 1));
  if (found.length === 0) throw new RecordingError(`${dir}: holds no recording files (*${SUFFIX})`);
  return found.map((name) => path.join(dir, name));
}

/** @param {string} dir */
function holdsRecordings(dir) {
  return fs.readdirSync(dir).some((name) => fileIndex(name) !== null);
}

/**
 * The files to replay: `file` itself when it is a file; else the recording files of the
 * directory; else those of its subdirectory named `controller` (one subdirectory per
 * controller). Without `controller`, a directory of subdirectories must hold exactly one.
 * @param {string} where
 * @param {string | null | undefined} controller
 * @returns {string[]}
 */
function findRecording(where, controller) {
  const stat = fs.statSync(where, { throwIfNoEntry: false });
  if (stat && stat.isFile()) return [where];
  if (!stat || !stat.isDirectory() || holdsRecordings(where)) return recordingFiles(where);
  const controllers = fs.readdirSync(where).sort().filter((name) => {
    const sub = path.join(where, name);
    return fs.statSync(sub).isDirectory() && holdsRecordings(sub);
  });
  const found = controllers.length > 0 ? `found: ${controllers.join(', ')}` : 'none';
  if (controller) {
    if (!controllers.includes(controller)) {
      throw new RecordingError(
        `${where}: holds no recording of controller ${controller} (${found})`);
    }
    return recordingFiles(path.join(where, controller));
  }
  if (controllers.length === 0) {
    throw new RecordingError(
      `${where}: holds no recording files (*${SUFFIX}), directly or per controller`);
  }
  if (controllers.length > 1) {
    throw new RecordingError(`${where}: holds recordings of several controllers (${found}): ` +
      'name one');
  }
  return recordingFiles(path.join(where, controllers[0]));
}

/**
 * The message framed at `offset` and the offset after it; null at the end of `data`.
 * @param {string} file
 * @param {Buffer} data
 * @param {number} offset
 * @param {string} what
 * @returns {{body: Buffer, end: number} | null}
 */
function readFrame(file, data, offset, what) {
  let size = 0;
  let pos = offset;
  for (let shift = 0; ; shift += 7) {
    if (pos === data.length) {
      if (pos === offset) return null;
      // The length runs past the end: at least one more byte was wanted.
      throw new RecordingError(`${file}: ${what} at offset ${offset} is cut short ` +
        `(${pos - offset} of ${pos - offset + 1} bytes): the recording was interrupted`);
    }
    const byte = data[pos++];
    size += (byte & 0x7f) * 2 ** shift; // not <<: sizes past 2^31 must not wrap
    if ((byte & 0x80) === 0) break;
    if (pos - offset === MAX_VARINT_BYTES) {
      throw new RecordingError(`${file}: ${what} at offset ${offset} has a malformed length`);
    }
  }
  if (size > MAX_RECORD_BYTES) {
    throw new RecordingError(`${file}: ${what} at offset ${offset} claims ${size} bytes, more ` +
      `than the limit of ${MAX_RECORD_BYTES} bytes: the file is corrupt`);
  }
  const prefix = pos - offset;
  if (pos + size > data.length) {
    throw new RecordingError(`${file}: ${what} at offset ${offset} is cut short ` +
      `(${data.length - offset} of ${prefix + size} bytes): the recording was interrupted`);
  }
  return { body: data.subarray(pos, pos + size), end: pos + size };
}

/**
 * @param {protobuf.Type} type
 * @param {Uint8Array} body
 * @returns {any} the object form, or null when `body` does not parse
 */
function decode(type, body) {
  try {
    return type.toObject(type.decode(body), LOADER_OPTIONS);
  } catch {
    return null;
  }
}

/**
 * @param {string} file
 * @param {Buffer} data
 * @returns {{header: any, end: number}}
 */
function readHeader(file, data) {
  if (data.length < MAGIC.length || !data.subarray(0, MAGIC.length).equals(MAGIC)) {
    throw new RecordingError(`${file}: not a ctrlhost recording (no CTRLREC magic at offset 0)`);
  }
  const frame = readFrame(file, data, MAGIC.length, 'header');
  if (!frame) {
    throw new RecordingError(`${file}: ends before its header at offset ${MAGIC.length}: the ` +
      'recording was interrupted');
  }
  const header = decode(types().header, frame.body);
  if (!header) {
    throw new RecordingError(`${file}: the header at offset ${MAGIC.length} is not a valid ` +
      'RecordingHeader');
  }
  if (header.format > FORMAT) {
    throw new RecordingError(`${file}: recording format ${header.format} is newer than this ` +
      `reader (it reads format ${FORMAT})`);
  }
  return { header, end: frame.end };
}

/**
 * One recording file, read whole: `start` is its magic and framed header byte for byte (a
 * rewrite keeps them as they were); each record comes with the offset of its length prefix and
 * its encoded bytes.
 * @typedef {{path: string, header: any, start: Buffer,
 *            records: {offset: number, record: any, bytes: Buffer}[]}} RecordingFile
 */

/**
 * Reads the file at `file` whole; RecordingError names what is wrong and where.
 * @param {string} file
 * @returns {RecordingFile}
 */
function readRecording(file) {
  let data;
  try {
    data = fs.readFileSync(file);
  } catch (e) {
    throw new RecordingError(`${file}: cannot open: ${e.message}`);
  }
  const { header, end } = readHeader(file, data);
  const records = [];
  for (let offset = end; ;) {
    const frame = readFrame(file, data, offset, 'record');
    if (!frame) return { path: file, header, start: data.subarray(0, end), records };
    const record = decode(types().record, frame.body);
    if (!record) {
      throw new RecordingError(`${file}: record at offset ${offset} is not a valid ` +
        'ReconcileRecord');
    }
    records.push({ offset, record, bytes: frame.body });
    offset = frame.end;
  }
}

/**
 * A record's bytes with its answer replaced by `response` (object form): every other field,
 * unknown ones included, kept byte for byte.
 * @param {Buffer} recordBytes
 * @param {any} response
 * @returns {Buffer}
 */
function withResponse(recordBytes, response) {
  const { record, response: responseType } = types();
  const answerFields = new Set(record.oneofs.answer.fieldsArray.map((f) => f.id));
  const reader = protobuf.Reader.create(recordBytes);
  const kept = [];
  while (reader.pos < reader.len) {
    const start = reader.pos;
    const tag = reader.uint32();
    reader.skipType(tag & 7);
    if (!answerFields.has(tag >>> 3)) kept.push(recordBytes.subarray(start, reader.pos));
  }
  const body = responseType.encode(responseType.fromObject(response)).finish();
  const field = protobuf.Writer.create().uint32((record.fields.response.id << 3) | 2).bytes(body);
  return Buffer.concat([...kept, field.finish()]);
}

/**
 * `message` preceded by its length as a base-128 varint.
 * @param {Uint8Array} message
 */
function frame(message) {
  const prefix = [];
  let size = message.length;
  while (size > 0x7f) {
    prefix.push((size & 0x7f) | 0x80);
    size = Math.floor(size / 128);
  }
  prefix.push(size);
  return Buffer.concat([Buffer.from(prefix), message]);
}

/**
 * Writes `data` to a temporary file beside `file` (same mode), then renames it over `file`: a
 * reader sees the old file or the new one, never half of one.
 * @param {string} file
 * @param {Buffer} data
 */
function replaceFile(file, data) {
  const temp = path.join(path.dirname(file),
    `.${path.basename(file)}.${process.pid}.${Date.now()}.tmp`);
  try {
    const fd = fs.openSync(temp, 'wx', fs.statSync(file).mode & 0o777);
    try {
      fs.writeSync(fd, data);
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    fs.renameSync(temp, file);
  } catch (e) {
    fs.rmSync(temp, { force: true });
    throw e;
  }
}

module.exports = {
  RecordingError, findRecording, readRecording, withResponse, frame, replaceFile, fileIndex,
  FORMAT, MAGIC, MAX_RECORD_BYTES,
};
