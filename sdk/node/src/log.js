// @ts-check
'use strict';
// Structured logs to stderr, one line per entry, in the host's text format:
//   2026-11-22T03:40:00.000000Z INFO plugin serving plugin=webapp address=unix:/tmp/w.sock
// The host captures a plugin's stderr line by line and tags it with the plugin, so a line must
// never contain a newline: values with spaces, quotes, '=' or control characters are JSON-quoted.

const LEVELS = { debug: 'DEBUG', info: 'INFO', warning: 'WARNING', error: 'ERROR' };

let sink = (line) => process.stderr.write(`${line}\n`);

function formatValue(value) {
  let text;
  if (value instanceof Error) text = value.message;
  else if (typeof value === 'string') text = value;
  else if (value === undefined) text = '';
  else if (typeof value === 'object' && value !== null) text = JSON.stringify(value);
  else text = String(value);
  // eslint-disable-next-line no-control-regex
  return text === '' || /[\s"=\x00-\x1f\x7f]/.test(text) ? JSON.stringify(text) : text;
}

function timestamp(date) {
  // Microseconds as the C++ host prints them; JavaScript dates stop at milliseconds.
  return date.toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
}

function formatLine(level, message, fields, date = new Date()) {
  let line = `${timestamp(date)} ${LEVELS[level] || 'INFO'} ${String(message).replace(/\n/g, ' ')}`;
  for (const [key, value] of Object.entries(fields || {})) {
    line += ` ${key}=${formatValue(value)}`;
  }
  return line;
}

function log(level, message, fields) {
  try {
    sink(formatLine(level, message, fields));
  } catch {
    // A closed stderr must never take the plugin down.
  }
}

module.exports = {
  formatLine,
  debug: (m, f) => log('debug', m, f),
  info: (m, f) => log('info', m, f),
  warning: (m, f) => log('warning', m, f),
  error: (m, f) => log('error', m, f),
  /** Replaces the output (tests); returns the previous sink. */
  setSink(fn) {
    const old = sink;
    sink = fn;
    return old;
  },
};
