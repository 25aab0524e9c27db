'use strict';
// tls.js: TLS configuration from the environment and the plaintext rule. The TLS handshakes
// themselves are tested with a host in e2e/remote.

const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const tls = require('../src/tls');

const PEM = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n';
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ctrlhost-tls-'));
function write(name, text) {
  const p = path.join(dir, name);
  fs.writeFileSync(p, text);
  return p;
}

test('nothing set is plaintext', () => {
  assert.equal(tls.serverTlsFromEnv({}), null);
});

test('reads the three files', () => {
  const got = tls.serverTlsFromEnv({
    [tls.CERT_FILE_ENV]: write('c.pem', PEM),
    [tls.KEY_FILE_ENV]: write('k.pem', '-----BEGIN PRIVATE KEY-----\nx\n'),
    [tls.CLIENT_CA_FILE_ENV]: write('ca.pem', PEM),
  });
  assert.equal(got.certChain.toString(), PEM);
  assert.equal(got.clientCa.toString(), PEM);
  assert.equal(got.mode, 'mutual');
  assert.equal(tls.loadServerTls(write('c.pem', PEM), write('k.pem', PEM), '').mode, 'tls');
});

test('certificate and key go together', () => {
  assert.throws(() => tls.serverTlsFromEnv({ [tls.CERT_FILE_ENV]: write('c.pem', PEM) }), {
    message: 'CTRLHOST_PLUGIN_TLS_CERT_FILE and CTRLHOST_PLUGIN_TLS_KEY_FILE must be set ' +
      'together (only CTRLHOST_PLUGIN_TLS_CERT_FILE is set)',
  });
  assert.throws(() => tls.loadServerTls('', '', write('ca.pem', PEM)),
    /CTRLHOST_PLUGIN_TLS_CLIENT_CA_FILE needs/);
});

test('missing and non-PEM files name the variable', () => {
  const cert = write('c.pem', PEM);
  assert.throws(() => tls.loadServerTls(cert, '/nonexistent/k', ''),
    { message: 'CTRLHOST_PLUGIN_TLS_KEY_FILE=/nonexistent/k: cannot read: ENOENT' });
  assert.throws(() => tls.loadServerTls(cert, write('key.txt', 'not a key'), ''),
    /key\.txt: not a PEM file/);
});

test('plaintext only on unix sockets and loopback', () => {
  for (const ok of ['unix:/tmp/x.sock', '127.0.0.1:0', '127.1.2.3:80', 'localhost:9443',
    '[::1]:9443']) {
    assert.doesNotThrow(() => tls.checkPlaintextAllowed(ok), ok);
  }
  for (const refused of ['0.0.0.0:9443', '[::]:9443', '10.0.0.1:9443', 'plugin.svc:9443',
    '128.0.0.1:1']) {
    assert.throws(() => tls.checkPlaintextAllowed(refused), /refusing to serve plaintext on /);
  }
});
