/**
 * The plugin's settings: `plugins.entries.memoryd.config` in openclaw.json, checked and
 * completed with defaults.
 *
 * OpenClaw validates the config against `configSchema` in openclaw.plugin.json before the
 * plugin loads; `parseConfig` checks it again (a hot reload or an old host may skip that)
 * and is the one place that knows the defaults, the environment fallbacks and the token.
 */

/** Environment variables read when the config leaves a field unset. */
export const ENV_TOKEN = "MEMORYD_AUTH_TOKEN";
export const ENV_ADDRESS = "MEMORYD_ADDRESS";

export const DEFAULTS = {
  address: "127.0.0.1:50051",
  hookTimeoutMs: 1_000,
  captureTimeoutMs: 5_000,
  toolTimeoutMs: 10_000,
  autoRecall: true,
  autoCapture: true,
} as const;

export interface MemorydPluginConfig {
  /** Full base URL of the daemon, e.g. "http://127.0.0.1:50051". */
  baseUrl: string;
  /** PEM file of a private CA to trust for TLS (read when the first call connects). */
  tlsCaFile: string | undefined;
  /** PEM files of the plugin's client certificate and its key (mTLS); both or neither. */
  tlsCertFile: string | undefined;
  tlsKeyFile: string | undefined;
  /** The API key (bearer token); undefined when auth is off or a certificate is the credential. Never logged. */
  token: string | undefined;
  /** Where the token came from, for status output (never the token itself). */
  tokenSource: "config" | "env" | "none";
  /** The before-prompt hook's whole budget: it returns (empty-handed if need be) by then. */
  hookTimeoutMs: number;
  /** Deadline of the after-turn Capture call. */
  captureTimeoutMs: number;
  /** Deadline of one tool call, retries included. */
  toolTimeoutMs: number;
  autoRecall: boolean;
  autoCapture: boolean;
  /** When set, only these agents have memory. */
  enabledAgents: ReadonlySet<string> | undefined;
  /** These agents never have memory (wins over enabledAgents). */
  disabledAgents: ReadonlySet<string>;
  /** Overrides of the daemon's hooks.max_results / hooks.min_score for auto-recall. */
  autoRecallMaxResults: number | undefined;
  autoRecallMinScore: number | undefined;
}

/** A config the plugin cannot run with; the message names the field and what to fix. */
export class ConfigError extends Error {
  override readonly name = "ConfigError";
}

const KEYS = new Set([
  "address",
  "tls",
  "tlsCaFile",
  "tlsCertFile",
  "tlsKeyFile",
  "token",
  "hookTimeoutMs",
  "captureTimeoutMs",
  "toolTimeoutMs",
  "autoRecall",
  "autoCapture",
  "enabledAgents",
  "disabledAgents",
  "autoRecallMaxResults",
  "autoRecallMinScore",
]);

export function parseConfig(
  raw: Record<string, unknown> | undefined,
  env: NodeJS.ProcessEnv = process.env,
): MemorydPluginConfig {
  const cfg = raw ?? {};
  if (typeof cfg !== "object" || Array.isArray(cfg)) {
    throw new ConfigError("the memoryd plugin config must be an object");
  }
  for (const key of Object.keys(cfg)) {
    if (!KEYS.has(key)) {
      throw new ConfigError(
        `unknown memoryd plugin setting "${key}"; known settings: ${[...KEYS].join(", ")}`,
      );
    }
  }
  const tlsCaFile = optionalString(cfg, "tlsCaFile");
  const tlsCertFile = optionalString(cfg, "tlsCertFile");
  const tlsKeyFile = optionalString(cfg, "tlsKeyFile");
  if ((tlsCertFile === undefined) !== (tlsKeyFile === undefined)) {
    throw new ConfigError("tlsCertFile and tlsKeyFile go together (the client certificate and its key, for mTLS)");
  }
  const tlsFiles = tlsCaFile !== undefined || tlsCertFile !== undefined;
  const tls = optionalBoolean(cfg, "tls") ?? (tlsFiles ? true : undefined);
  if (tls === false && tlsFiles) {
    throw new ConfigError("tlsCaFile, tlsCertFile and tlsKeyFile need TLS; remove tls: false");
  }
  const address = optionalString(cfg, "address") ?? nonEmpty(env[ENV_ADDRESS]) ?? DEFAULTS.address;
  const configToken = optionalString(cfg, "token");
  const token = configToken !== undefined ? expandEnv(configToken, "token", env) : nonEmpty(env[ENV_TOKEN]);
  return {
    baseUrl: baseUrlOf(address, tls),
    tlsCaFile,
    tlsCertFile,
    tlsKeyFile,
    token: token || undefined,
    tokenSource: configToken !== undefined ? "config" : token ? "env" : "none",
    hookTimeoutMs: integer(cfg, "hookTimeoutMs", 50, 60_000) ?? DEFAULTS.hookTimeoutMs,
    captureTimeoutMs: integer(cfg, "captureTimeoutMs", 100, 600_000) ?? DEFAULTS.captureTimeoutMs,
    toolTimeoutMs: integer(cfg, "toolTimeoutMs", 100, 600_000) ?? DEFAULTS.toolTimeoutMs,
    autoRecall: optionalBoolean(cfg, "autoRecall") ?? DEFAULTS.autoRecall,
    autoCapture: optionalBoolean(cfg, "autoCapture") ?? DEFAULTS.autoCapture,
    enabledAgents: agentList(cfg, "enabledAgents"),
    disabledAgents: agentList(cfg, "disabledAgents") ?? new Set(),
    autoRecallMaxResults: integer(cfg, "autoRecallMaxResults", 1, 50),
    autoRecallMinScore: number(cfg, "autoRecallMinScore", 0, 1),
  };
}

/** Whether `agentId` has memory under this config (the caller has checked it is present). */
export function agentEnabled(config: MemorydPluginConfig, agentId: string): boolean {
  if (config.disabledAgents.has(agentId)) return false;
  return config.enabledAgents === undefined || config.enabledAgents.has(agentId);
}

/**
 * "host:port" gets a scheme from `tls`; a URL must agree with `tls` when both are given.
 * (The same rule as @memoryd/client's address option.)
 */
export function baseUrlOf(address: string, tls: boolean | undefined): string {
  const match = /^(https?):\/\//i.exec(address);
  if (!match) {
    if (/[/\s]/.test(address) || !/:\d+$/.test(address)) {
      throw new ConfigError(
        `address "${address}" is not host:port or an http(s):// URL (e.g. "127.0.0.1:50051")`,
      );
    }
    return `${tls ? "https" : "http"}://${address}`;
  }
  const secure = match[1]!.toLowerCase() === "https";
  if (tls !== undefined && tls !== secure) {
    throw new ConfigError(`address ${address} contradicts tls: ${tls} (the tls* settings need an https:// address)`);
  }
  return address.replace(/\/+$/, "");
}

/** "${NAME}" is replaced by the environment variable NAME (an unset one is an error). */
function expandEnv(value: string, field: string, env: NodeJS.ProcessEnv): string {
  return value.replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g, (_, name: string) => {
    const found = env[name];
    if (found === undefined || found === "") {
      throw new ConfigError(`${field} refers to \${${name}}, which is not set in the environment`);
    }
    return found;
  });
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value.trim() === "" ? undefined : value.trim();
}

function optionalString(cfg: Record<string, unknown>, key: string): string | undefined {
  const value = cfg[key];
  if (value === undefined) return undefined;
  if (typeof value !== "string" || value.trim() === "") {
    throw new ConfigError(`${key} must be a non-empty string`);
  }
  return value.trim();
}

function optionalBoolean(cfg: Record<string, unknown>, key: string): boolean | undefined {
  const value = cfg[key];
  if (value === undefined) return undefined;
  if (typeof value !== "boolean") throw new ConfigError(`${key} must be true or false`);
  return value;
}

function number(
  cfg: Record<string, unknown>,
  key: string,
  min: number,
  max: number,
): number | undefined {
  const value = cfg[key];
  if (value === undefined) return undefined;
  if (typeof value !== "number" || !Number.isFinite(value) || value < min || value > max) {
    throw new ConfigError(`${key} must be a number from ${min} to ${max}`);
  }
  return value;
}

function integer(
  cfg: Record<string, unknown>,
  key: string,
  min: number,
  max: number,
): number | undefined {
  const value = number(cfg, key, min, max);
  if (value !== undefined && !Number.isInteger(value)) {
    throw new ConfigError(`${key} must be a whole number from ${min} to ${max}`);
  }
  return value;
}

function agentList(cfg: Record<string, unknown>, key: string): ReadonlySet<string> | undefined {
  const value = cfg[key];
  if (value === undefined) return undefined;
  if (!Array.isArray(value) || value.some((v) => typeof v !== "string" || v.trim() === "")) {
    throw new ConfigError(`${key} must be a list of agent ids`);
  }
  return new Set(value.map((v: string) => v.trim()));
}
