/**
 * The plugin's connection to memoryd: a MemorydClient (MemoryService) and a typed
 * HookService client, created on first use and shared by every registration of the plugin
 * in this process that has the same address, TLS and token.
 *
 * OpenClaw calls `register()` several times per process (discovery, tool discovery, full
 * runtime); none of them may connect. Nothing here does I/O until a tool or hook makes a
 * call, and an idle HTTP/2 connection does not keep the process alive.
 */

import { readFileSync } from "node:fs";
import type * as http2 from "node:http2";

import type { MessageInitShape } from "@bufbuild/protobuf";
import type { Client, Interceptor } from "@connectrpc/connect";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import type {
  BuildContextRequestSchema,
  BuildContextResponse,
  CaptureRequestSchema,
  CaptureResponse,
} from "@memoryd/client";
import { HookService, MemorydClient, MemorydError } from "@memoryd/client";

import type { MemorydPluginConfig } from "./config.ts";

export type BuildContextInit = MessageInitShape<typeof BuildContextRequestSchema>;
export type CaptureInit = MessageInitShape<typeof CaptureRequestSchema>;

export interface HookCallOptions {
  /** Deadline of the call in ms. */
  timeoutMs: number;
  signal?: AbortSignal;
}

/**
 * HookService (BuildContext, Capture): what a gateway calls before a prompt and after a
 * turn. Calls are never retried (a hook has a budget, and Capture writes); every failure
 * is a MemorydError, like MemorydClient's.
 */
export class HookClient {
  private readonly rpc: Client<typeof HookService>;
  private readonly sessions: Http2SessionManager;

  constructor(options: {
    baseUrl: string;
    token?: string | undefined;
    nodeOptions?: http2.SecureClientSessionOptions | undefined;
  }) {
    const interceptors: Interceptor[] = [];
    const token = options.token;
    if (token) {
      interceptors.push((next) => (request) => {
        request.header.set("authorization", `Bearer ${token}`);
        return next(request);
      });
    }
    this.sessions = new Http2SessionManager(options.baseUrl, {}, options.nodeOptions);
    const transport = createGrpcTransport({
      baseUrl: options.baseUrl,
      sessionManager: this.sessions,
      interceptors,
    });
    this.rpc = createClient(HookService, transport);
  }

  /** The `<relevant-memories>` block for a prompt (empty, with a reason, when skipped). */
  async buildContext(request: BuildContextInit, options: HookCallOptions): Promise<BuildContextResponse> {
    try {
      return await this.rpc.buildContext(request, options);
    } catch (reason) {
      throw MemorydError.from(reason);
    }
  }

  /** Stores what the turn's user messages asked to be remembered; one decision per message. */
  async capture(request: CaptureInit, options: HookCallOptions): Promise<CaptureResponse> {
    try {
      return await this.rpc.capture(request, options);
    } catch (reason) {
      throw MemorydError.from(reason);
    }
  }

  /** Closes the HTTP/2 connection; a later call reconnects. */
  close(): void {
    this.sessions.abort();
  }
}

/** Both clients of one daemon, built lazily. */
export class Connection {
  private memoryClient: MemorydClient | undefined;
  private hookClient: HookClient | undefined;
  private nodeOptions: http2.SecureClientSessionOptions | undefined;
  private readonly config: ConnectionSettings;

  constructor(config: ConnectionSettings) {
    this.config = config;
  }

  get memories(): MemorydClient {
    this.memoryClient ??= new MemorydClient({
      address: this.config.baseUrl,
      token: this.config.token,
      timeoutMs: this.config.toolTimeoutMs,
      nodeOptions: this.tlsOptions(),
    });
    return this.memoryClient;
  }

  get hooks(): HookClient {
    this.hookClient ??= new HookClient({
      baseUrl: this.config.baseUrl,
      token: this.config.token,
      nodeOptions: this.tlsOptions(),
    });
    return this.hookClient;
  }

  close(): void {
    this.memoryClient?.close();
    this.hookClient?.close();
    this.memoryClient = undefined;
    this.hookClient = undefined;
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
