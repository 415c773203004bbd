/**
 * TLS and mTLS for the client: which CA to trust, and this client's certificate.
 *
 * The daemon serves TLS with `server.tls_cert`/`server.tls_key`; with
 * `server.tls_client_ca` it also requires a client certificate (mTLS), whose common name
 * or a subject alternative name must be listed as a `tls_identity` in its keys file.
 * Each of `ca`, `cert`, `key` is given as PEM text or as a PEM file path (`caFile`, ...);
 * files are read once, when the client is built.
 */

import { readFileSync } from "node:fs";
import type * as http2 from "node:http2";

export interface TlsOptions {
  /** PEM of the CA(s) that signed the daemon's certificate. Default: Node's trusted roots. */
  ca?: string | Buffer;
  /** A PEM file holding `ca`. */
  caFile?: string;
  /** PEM of this client's certificate (mTLS); needs `key` too. */
  cert?: string | Buffer;
  /** A PEM file holding `cert`. */
  certFile?: string;
  /** PEM of the private key of `cert`. */
  key?: string | Buffer;
  /** A PEM file holding `key`. */
  keyFile?: string;
}

/** The http2.connect options of `tls` (a thrown TypeError names what is wrong). */
export function tlsNodeOptions(tls: TlsOptions): http2.SecureClientSessionOptions {
  const ca = pem(tls, "ca");
  const cert = pem(tls, "cert");
  const key = pem(tls, "key");
  if ((cert === undefined) !== (key === undefined)) {
    throw new TypeError("tls: give a client certificate and its key together (cert/certFile with key/keyFile), or neither");
  }
  const options: http2.SecureClientSessionOptions = {};
  if (ca !== undefined) options.ca = ca;
  if (cert !== undefined) options.cert = cert;
  if (key !== undefined) options.key = key;
  return options;
}

function pem(tls: TlsOptions, name: "ca" | "cert" | "key"): string | Buffer | undefined {
  const given = tls[name];
  const file = tls[`${name}File`];
  if (given !== undefined && file !== undefined) {
    throw new TypeError(`tls: give ${name} or ${name}File, not both`);
  }
  if (file === undefined) return given;
  try {
    return readFileSync(file);
  } catch (error) {
    throw new TypeError(`tls.${name}File: cannot read ${file}: ${(error as Error).message}`, { cause: error });
  }
}
