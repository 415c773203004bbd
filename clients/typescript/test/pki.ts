/**
 * A throwaway PKI for the mTLS tests, made with the `openssl` CLI (Debian's package
 * openssl, which ca-certificates depends on) in a temporary directory: a CA, a server
 * certificate for 127.0.0.1 and client certificates, each valid for one day.
 */

import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);

/** A PEM certificate and its key, as files and as text. */
export interface Pair {
  certFile: string;
  keyFile: string;
  cert: string;
  key: string;
}

export interface Pki {
  dir: string;
  /** The CA's certificate (trust anchor of the server and of the client certificates). */
  caFile: string;
  ca: string;
  /** A server certificate for IP 127.0.0.1 and DNS localhost. */
  server: Pair;
  /** A client certificate whose common name is `cn`. */
  client(cn: string): Promise<Pair>;
  /** A certificate for `cn` signed by another CA, which the daemon does not trust. */
  stranger(cn: string): Promise<Pair>;
  dispose(): Promise<void>;
}

const CONFIG = `
[req]
distinguished_name = dn
prompt = no
[dn]
[ca]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
[server]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1, DNS:localhost
[client]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = clientAuth
`;

async function openssl(args: string[]): Promise<void> {
  try {
    await run("openssl", args);
  } catch (error) {
    const e = error as NodeJS.ErrnoException & { stderr?: string };
    if (e.code === "ENOENT") {
      throw new Error("the mTLS tests need the openssl CLI on PATH (Debian: apt-get install openssl)");
    }
    throw new Error(`openssl ${args.join(" ")} failed: ${e.stderr ?? e.message}`);
  }
}

export async function makePki(): Promise<Pki> {
  const dir = await mkdtemp(join(tmpdir(), "memoryd-ts-pki-"));
  const config = join(dir, "openssl.cnf");
  await writeFile(config, CONFIG);
  const newKey = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
  let serial = 1;

  async function selfSigned(name: string, cn: string): Promise<{ certFile: string; keyFile: string }> {
    const certFile = join(dir, `${name}.pem`);
    const keyFile = join(dir, `${name}.key`);
    await openssl(["req", "-x509", "-new", ...newKey, "-keyout", keyFile, "-out", certFile, "-days", "1",
      "-subj", `/CN=${cn}`, "-config", config, "-extensions", "ca"]); // prettier-ignore
    return { certFile, keyFile };
  }

  async function issue(name: string, cn: string, section: "server" | "client", ca: { certFile: string; keyFile: string }): Promise<Pair> {
    const certFile = join(dir, `${name}.pem`);
    const keyFile = join(dir, `${name}.key`);
    const csr = join(dir, `${name}.csr`);
    await openssl(["req", "-new", ...newKey, "-keyout", keyFile, "-out", csr, "-subj", `/CN=${cn}`, "-config", config]);
    await openssl(["x509", "-req", "-in", csr, "-CA", ca.certFile, "-CAkey", ca.keyFile, "-set_serial", String(serial++),
      "-days", "1", "-out", certFile, "-extfile", config, "-extensions", section]); // prettier-ignore
    return { certFile, keyFile, cert: await readFile(certFile, "utf8"), key: await readFile(keyFile, "utf8") };
  }

  const ca = await selfSigned("ca", "memoryd test CA");
  const server = await issue("server", "memoryd test server", "server", ca);
  let otherCa: { certFile: string; keyFile: string } | undefined;
  return {
    dir,
    caFile: ca.certFile,
    ca: await readFile(ca.certFile, "utf8"),
    server,
    client: (cn) => issue(`client-${cn}`, cn, "client", ca),
    async stranger(cn) {
      otherCa ??= await selfSigned("other-ca", "some other CA");
      return issue(`stranger-${cn}`, cn, "client", otherCa);
    },
    dispose: () => rm(dir, { recursive: true, force: true }),
  };
}
