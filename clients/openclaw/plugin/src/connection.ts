/**
 * The plugin's connection to memoryd: one MemorydClient (MemoryService for the tools,
 * HookService's buildContext/capture for the hooks), created on first use and shared by
 * every registration of the plugin in this process that has the same address, TLS files
 * and token (the API key).
 *
 * OpenClaw calls `register()` several times per process (discovery, tool discovery, full
 * runtime); none of them may connect. Nothing here does I/O until a tool or hook makes a
 * call, and an idle HTTP/2 connection does not keep the process alive.
 */

import type { TlsOptions } from "@memoryd/client";
import { MemorydClient, MemorydError } from "@memoryd/client";

import type { MemorydPluginConfig } from "./config.ts";

/** The client of one daemon, built lazily. */
export class Connection {
  private memorydClient: MemorydClient | undefined;
  private readonly config: ConnectionSettings;

  constructor(config: ConnectionSettings) {
    this.config = config;
  }

  /**
   * Tools and hooks alike. Every call passes its own deadline (`toolTimeoutMs`,
   * `hookTimeoutMs`, `captureTimeoutMs`); the hooks' calls are never retried. The TLS
   * files are read here, on first use: one that cannot be read fails the call with
   * FAILED_PRECONDITION naming it (and is read again on the next call).
   */
  get client(): MemorydClient {
    if (this.memorydClient) return this.memorydClient;
    const { tlsCaFile, tlsCertFile, tlsKeyFile } = this.config;
    const tls: TlsOptions = {};
    if (tlsCaFile) tls.caFile = tlsCaFile;
    if (tlsCertFile) tls.certFile = tlsCertFile;
    if (tlsKeyFile) tls.keyFile = tlsKeyFile;
    try {
      this.memorydClient = new MemorydClient({
        address: this.config.baseUrl,
        token: this.config.token,
        timeoutMs: this.config.toolTimeoutMs,
        ...(Object.keys(tls).length > 0 ? { tls } : {}),
      });
    } catch (error) {
      // e.g. "tls.caFile: cannot read /etc/memoryd/ca.pem: ENOENT ...", said with this
      // plugin's setting name (tlsCaFile).
      const message = (error as Error).message.replace(
        /\btls\.(ca|cert|key)File\b/,
        (_, name: string) => `tls${name[0]!.toUpperCase()}${name.slice(1)}File`,
      );
      throw new MemorydError("FAILED_PRECONDITION", message, { cause: error });
    }
    return this.memorydClient;
  }

  /** Closes the HTTP/2 connection; a later call reconnects. */
  close(): void {
    this.memorydClient?.close();
    this.memorydClient = undefined;
  }
}

type ConnectionSettings = Pick<
  MemorydPluginConfig,
  "baseUrl" | "token" | "tlsCaFile" | "tlsCertFile" | "tlsKeyFile" | "toolTimeoutMs"
>;

const connections = new Map<string, Connection>();

/** The shared connection for these settings (created without connecting). */
export function connectionFor(config: MemorydPluginConfig): Connection {
  const settings: ConnectionSettings = {
    baseUrl: config.baseUrl,
    token: config.token,
    tlsCaFile: config.tlsCaFile,
    tlsCertFile: config.tlsCertFile,
    tlsKeyFile: config.tlsKeyFile,
    toolTimeoutMs: config.toolTimeoutMs,
  };
  const key = JSON.stringify(settings);
  let connection = connections.get(key);
  if (!connection) {
    connection = new Connection(settings);
    connections.set(key, connection);
  }
  return connection;
}

/** Closes every connection (the gateway is stopping). */
export function closeAllConnections(): void {
  for (const connection of connections.values()) connection.close();
  connections.clear();
}
