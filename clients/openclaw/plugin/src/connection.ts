/**
 * The plugin's connection to memoryd: one MemorydClient (MemoryService for the tools,
 * HookService's buildContext/capture for the hooks), created on first use and shared by
 * every registration of the plugin in this process that has the same address, TLS and
 * token.
 *
 * OpenClaw calls `register()` several times per process (discovery, tool discovery, full
 * runtime); none of them may connect. Nothing here does I/O until a tool or hook makes a
 * call, and an idle HTTP/2 connection does not keep the process alive.
 */

import { readFileSync } from "node:fs";
import type * as http2 from "node:http2";

import { MemorydClient, MemorydError } from "@memoryd/client";

import type { MemorydPluginConfig } from "./config.ts";

/** The client of one daemon, built lazily. */
export class Connection {
  private memorydClient: MemorydClient | undefined;
  private nodeOptions: http2.SecureClientSessionOptions | undefined;
  private readonly config: ConnectionSettings;

  constructor(config: ConnectionSettings) {
    this.config = config;
  }

  /**
   * Tools and hooks alike. Every call passes its own deadline (`toolTimeoutMs`,
   * `hookTimeoutMs`, `captureTimeoutMs`); the hooks' calls are never retried.
   */
  get client(): MemorydClient {
    this.memorydClient ??= new MemorydClient({
      address: this.config.baseUrl,
      token: this.config.token,
      timeoutMs: this.config.toolTimeoutMs,
      nodeOptions: this.tlsOptions(),
    });
    return this.memorydClient;
  }

  /** Closes the HTTP/2 connection; a later call reconnects. */
  close(): void {
    this.memorydClient?.close();
    this.memorydClient = undefined;
  }

  private tlsOptions(): http2.SecureClientSessionOptions | undefined {
    if (this.nodeOptions === undefined && this.config.tlsCaFile) {
      try {
        this.nodeOptions = { ca: readFileSync(this.config.tlsCaFile) };
      } catch (error) {
        throw new MemorydError(
          "FAILED_PRECONDITION",
          `cannot read tlsCaFile ${this.config.tlsCaFile}: ${(error as Error).message}`,
        );
      }
    }
    return this.nodeOptions;
  }
}

type ConnectionSettings = Pick<MemorydPluginConfig, "baseUrl" | "token" | "tlsCaFile" | "toolTimeoutMs">;

const connections = new Map<string, Connection>();

/** The shared connection for these settings (created without connecting). */
export function connectionFor(config: MemorydPluginConfig): Connection {
  const settings: ConnectionSettings = {
    baseUrl: config.baseUrl,
    token: config.token,
    tlsCaFile: config.tlsCaFile,
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
