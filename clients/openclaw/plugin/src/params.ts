/**
 * Checking tool arguments. The gateway's `POST /tools/invoke` hands a tool whatever JSON
 * the caller sent (it does not validate against the tool's schema), and models get
 * arguments wrong too, so every tool reads its arguments through these helpers.
 *
 * A bad argument throws ToolInputError: OpenClaw answers it with HTTP 400 on
 * /tools/invoke and shows the model the message; nothing is sent to memoryd.
 */

import { Category } from "@memoryd/client";

/** Bad tool input. The name (not the class) is what OpenClaw's gateway recognises. */
export class ToolInputError extends Error {
  override readonly name = "ToolInputError";
  readonly status: number = 400;
}

/** The caller may not do this (a scope the policy forbids). Answered with HTTP 403. */
export class ToolAuthorizationError extends Error {
  override readonly name = "ToolAuthorizationError";
  readonly status: number = 403;
}

/** A category as the tools name it: its proto enum name in lower case ("preference"). */
export type CategoryName = Lowercase<Exclude<keyof typeof Category, "UNSPECIFIED">>;

/** Every category but UNSPECIFIED, in wire order, from the generated enum (the proto is
 * the one list of categories). */
const CATEGORY_VALUES = new Map<CategoryName, Category>(
  Object.entries(Category)
    .filter((entry): entry is [string, Category] => typeof entry[1] === "number")
    .filter(([, value]) => value !== Category.UNSPECIFIED)
    .sort(([, a], [, b]) => a - b)
    .map(([key, value]) => [key.toLowerCase() as CategoryName, value]),
);

export const CATEGORY_NAMES: readonly CategoryName[] = [...CATEGORY_VALUES.keys()];

/** "preference" for Category.PREFERENCE; "unspecified" for anything unknown. */
export function categoryName(category: Category): string {
  for (const [name, value] of CATEGORY_VALUES) {
    if (value === category) return name;
  }
  return "unspecified";
}

/** One tool call's arguments, read field by field; unknown fields are refused up front. */
export class Params {
  private readonly tool: string;
  private readonly values: Record<string, unknown>;

  constructor(tool: string, raw: unknown, allowed: readonly string[]) {
    this.tool = tool;
    if (raw === undefined || raw === null) raw = {};
    if (typeof raw !== "object" || Array.isArray(raw)) {
      throw new ToolInputError(`${tool}: arguments must be a JSON object`);
    }
    this.values = raw as Record<string, unknown>;
    const unknown = Object.keys(this.values).filter(
      (key) => !allowed.includes(key) && this.values[key] !== undefined,
    );
    if (unknown.length > 0) {
      const expected = allowed.length > 0 ? allowed.join(", ") : "none";
      throw new ToolInputError(
        `${tool}: unknown argument${unknown.length > 1 ? "s" : ""} ${unknown.join(", ")}; expected: ${expected}`,
      );
    }
  }

  has(key: string): boolean {
    const value = this.values[key];
    return value !== undefined && value !== null;
  }

  /** A string with visible characters, trimmed; undefined when absent. */
  text(key: string, options: { maxChars?: number } = {}): string | undefined {
    if (!this.has(key)) return undefined;
    const value = this.values[key];
    if (typeof value !== "string") {
      throw new ToolInputError(`${this.tool}: ${key} must be a string, got ${typeName(value)}`);
    }
    const trimmed = value.trim();
    if (trimmed === "") throw new ToolInputError(`${this.tool}: ${key} is empty`);
    if (options.maxChars !== undefined && trimmed.length > options.maxChars) {
      throw new ToolInputError(
        `${this.tool}: ${key} is ${trimmed.length} characters; the limit is ${options.maxChars}`,
      );
    }
    return trimmed;
  }

  requiredText(key: string, options: { maxChars?: number } = {}): string {
    const value = this.text(key, options);
    if (value === undefined) throw new ToolInputError(`${this.tool}: ${key} is required`);
    return value;
  }

  /** A number in [min, max] (a numeric string is accepted); undefined when absent. */
  number(key: string, min: number, max: number, options: { integer?: boolean } = {}): number | undefined {
    if (!this.has(key)) return undefined;
    let value = this.values[key];
    if (typeof value === "string" && value.trim() !== "" && Number.isFinite(Number(value))) {
      value = Number(value);
    }
    const kind = options.integer ? "a whole number" : "a number";
    if (typeof value !== "number" || !Number.isFinite(value)) {
      throw new ToolInputError(`${this.tool}: ${key} must be ${kind} from ${min} to ${max}, got ${typeName(value)}`);
    }
    if ((options.integer && !Number.isInteger(value)) || value < min || value > max) {
      throw new ToolInputError(`${this.tool}: ${key} must be ${kind} from ${min} to ${max}, got ${value}`);
    }
    return value;
  }

  boolean(key: string): boolean | undefined {
    if (!this.has(key)) return undefined;
    const value = this.values[key];
    if (value === true || value === "true") return true;
    if (value === false || value === "false") return false;
    throw new ToolInputError(`${this.tool}: ${key} must be true or false, got ${typeName(value)}`);
  }

  /** One of `choices` (case-insensitive); undefined when absent. */
  choice<T extends string>(key: string, choices: readonly T[]): T | undefined {
    if (!this.has(key)) return undefined;
    const value = this.values[key];
    const lower = typeof value === "string" ? value.trim().toLowerCase() : undefined;
    const found = choices.find((c) => c === lower);
    if (found === undefined) {
      throw new ToolInputError(
        `${this.tool}: ${key} must be one of ${choices.join(", ")}, got ${JSON.stringify(value)}`,
      );
    }
    return found;
  }

  category(key = "category"): Category | undefined {
    const name = this.choice(key, CATEGORY_NAMES);
    return name === undefined ? undefined : CATEGORY_VALUES.get(name);
  }

  /** A memory id: a UUID in its text form. */
  memoryId(key = "memoryId"): string | undefined {
    const value = this.text(key, { maxChars: 64 });
    if (value !== undefined && !UUID.test(value)) {
      throw new ToolInputError(`${this.tool}: ${key} ${JSON.stringify(value)} is not a memory id (a UUID)`);
    }
    return value?.toLowerCase();
  }

  /** A scope such as "agent:main", "workspace:team" or "global". */
  scope(key = "scope"): string | undefined {
    const value = this.text(key, { maxChars: 100 });
    if (value !== undefined && !SCOPE.test(value)) {
      throw new ToolInputError(
        `${this.tool}: ${key} ${JSON.stringify(value)} is not a scope (e.g. "agent:main", "workspace:team", "global")`,
      );
    }
    return value;
  }
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const SCOPE = /^[A-Za-z0-9._:-]{1,100}$/;

function typeName(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  return typeof value === "string" ? JSON.stringify(value) : `a ${typeof value}`;
}
