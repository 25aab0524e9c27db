// @ts-check
'use strict';
// TLS for a plugin served over TCP: what the host's `endpoint.tls` dials (docs/operator-spec.md).
//
// Configured by environment variables, read by Plugin.run():
//   CTRLHOST_PLUGIN_TLS_CERT_FILE       PEM certificate chain the plugin presents  } both or
//   CTRLHOST_PLUGIN_TLS_KEY_FILE        PEM private key of that certificate        } neither
//   CTRLHOST_PLUGIN_TLS_CLIENT_CA_FILE  PEM CA bundle: when set, the host must present a client
//                                       certificate signed by it (mutual TLS)
// Without a certificate the plugin serves plaintext, which is allowed only on Unix sockets and
// loopback hosts (localhost, 127.*, ::1): a plugin asked to listen on any other TCP address
// refuses to start rather than expose an unauthenticated reconcile endpoint.

const fs = require('fs');

const CERT_FILE_ENV = 'CTRLHOST_PLUGIN_TLS_CERT_FILE';
const KEY_FILE_ENV = 'CTRLHOST_PLUGIN_TLS_KEY_FILE';
const CLIENT_CA_FILE_ENV = 'CTRLHOST_PLUGIN_TLS_CLIENT_CA_FILE';

function readPem(variable, path) {
  let pem;
  try {
    pem = fs.readFileSync(path);
  } catch (e) {
    throw new Error(`${variable}=${path}: cannot read: ${e.code || e.message}`);
  }
  if (!pem.includes('-----BEGIN ')) {
    throw new Error(`${variable}=${path}: not a PEM file (no -----BEGIN line)`);
  }
  return pem;
}

/**
 * Reads the files named: {certChain, privateKey, clientCa (null: no client certificate asked),
 * mode ('tls' | 'mutual')}, or null (plaintext) when none is named. Throws an Error naming the
 * variable and the file when only one of cert/key is set, a client CA comes without a
 * certificate, or a file cannot be read or is not PEM.
 */
/**
 * @param {string} certFile
 * @param {string} keyFile
 * @param {string} [clientCaFile]
 * @returns {{certChain: Buffer, privateKey: Buffer, clientCa: Buffer | null,
 *            mode: 'tls' | 'mutual'} | null}
 */
function loadServerTls(certFile, keyFile, clientCaFile) {
  if (Boolean(certFile) !== Boolean(keyFile)) {
    throw new Error(`${CERT_FILE_ENV} and ${KEY_FILE_ENV} must be set together ` +
      `(only ${certFile ? CERT_FILE_ENV : KEY_FILE_ENV} is set)`);
  }
  if (!certFile) {
    if (clientCaFile) {
      throw new Error(`${CLIENT_CA_FILE_ENV} needs ${CERT_FILE_ENV} and ${KEY_FILE_ENV} ` +
        '(client certificates are a TLS feature)');
    }
    return null;
  }
  const clientCa = clientCaFile ? readPem(CLIENT_CA_FILE_ENV, clientCaFile) : null;
  return {
    certChain: readPem(CERT_FILE_ENV, certFile),
    privateKey: readPem(KEY_FILE_ENV, keyFile),
    clientCa,
    mode: clientCa ? 'mutual' : 'tls',
  };
}

/** loadServerTls with the three environment variables (process.env by default). */
function serverTlsFromEnv(env = process.env) {
  return loadServerTls(env[CERT_FILE_ENV] || '', env[KEY_FILE_ENV] || '',
    env[CLIENT_CA_FILE_ENV] || '');
}

/** True for "unix:..." and for "host:port" whose host is localhost, 127.* or ::1. */
function isLoopbackOrUnix(listen) {
  if (listen.startsWith('unix:')) return true;
  let host = listen.slice(0, Math.max(0, listen.lastIndexOf(':')));
  if (host.startsWith('[') && host.endsWith(']')) host = host.slice(1, -1);
  return host === 'localhost' || host === '::1' || host.startsWith('127.');
}

/** Throws unless plaintext may be served on `listen` (a Unix socket or loopback). */
function checkPlaintextAllowed(listen) {
  if (isLoopbackOrUnix(listen)) return;
  throw new Error(`refusing to serve plaintext on ${listen}: a TCP address other than ` +
    `localhost, 127.* or ::1 needs TLS: set ${CERT_FILE_ENV} and ${KEY_FILE_ENV} ` +
    `(and ${CLIENT_CA_FILE_ENV} to require the host's client certificate)`);
}

/** grpc-js ServerCredentials for `tls` (null: plaintext). */
function serverCredentials(grpc, tls) {
  if (!tls) return grpc.ServerCredentials.createInsecure();
  return grpc.ServerCredentials.createSsl(
    tls.clientCa, [{ private_key: tls.privateKey, cert_chain: tls.certChain }],
    tls.clientCa !== null);
}

module.exports = {
  CERT_FILE_ENV,
  KEY_FILE_ENV,
  CLIENT_CA_FILE_ENV,
  loadServerTls,
  serverTlsFromEnv,
  isLoopbackOrUnix,
  checkPlaintextAllowed,
  serverCredentials,
};
