/**
 * The plugin's logging: OpenClaw's plugin logger with a "memoryd: " prefix, plus
 * `once(key, ...)` for conditions that would otherwise be logged on every turn (memoryd
 * down, a context without an agent id). A condition is logged again after `reset(key)`,
 * e.g. when memoryd went away, came back and went away again. What was logged is shared
 * by every registration of the plugin in the process (OpenClaw registers it several
 * times), so a condition is logged once per process, not once per registration.
 */

export type Level = "debug" | "info" | "warn" | "error";

export interface HostLogger {
  debug?: (message: string) => void;
  info: (message: string) => void;
  warn: (message: string) => void;
  error: (message: string) => void;
}

/** At most this many distinct keys are remembered; past it the oldest is forgotten. */
const MAX_KEYS = 200;
const seen = new Set<string>();

export class PluginLog {
  private readonly host: HostLogger;

  constructor(host: HostLogger) {
    this.host = host;
  }

  log(level: Level, message: string): void {
    const line = `memoryd: ${message}`;
    if (level === "debug") this.host.debug?.(line);
    else this.host[level](line);
  }

  debug(message: string): void {
    this.log("debug", message);
  }

  info(message: string): void {
    this.log("info", message);
  }

  warn(message: string): void {
    this.log("warn", message);
  }

  /** Logs at `level` the first time `key` is seen, at debug afterwards. */
  once(key: string, level: Level, message: string): void {
    if (seen.has(key)) {
      this.log("debug", message);
      return;
    }
    if (seen.size >= MAX_KEYS) {
      const oldest = seen.values().next().value;
      if (oldest !== undefined) seen.delete(oldest);
    }
    seen.add(key);
    this.log(level, message);
  }

  /** Whether `key` was logged and not reset since. */
  has(key: string): boolean {
    return seen.has(key);
  }

  reset(key: string): void {
    seen.delete(key);
  }
}
