/**
 * Routing over a fleet of daemons: which daemon serves an agent, and when to try another.
 *
 * Agent affinity is rendezvous (highest random weight) hashing, the same rule in every
 * memoryd client (Python, TypeScript, Go, Rust, Java; checked against
 * tests/data/routing_vectors.json), so a host mixing languages sends one agent to one
 * daemon and that daemon's caches stay warm:
 *
 * - an address is taken as given, without a leading `http://` or `https://` and a
 *   trailing `/` ("http://10.0.0.5:50051/" and "10.0.0.5:50051" are one daemon);
 * - its weight for an agent is the first 8 bytes of
 *   SHA-256(address UTF-8 || 0x00 || agentId UTF-8), a big-endian unsigned 64-bit integer;
 * - the agent's order is every address by weight, highest first (ties: the smaller
 *   address first, by UTF-8 bytes). The agent goes to the first daemon of its order that
 *   is up, and fails over along it.
 *
 * What fails over (the client applies it, see client.ts):
 * - a daemon that cannot be reached (connection refused, none within connectTimeoutMs):
 *   every call moves on, since nothing was sent;
 * - UNAVAILABLE answered by a call: an idempotent call moves on (reads, and store and
 *   capture, which carry an idempotency key, made by the client when there is none); any
 *   other call (update, forget) throws it, because the request may have reached the daemon;
 * - nothing else: INVALID_ARGUMENT, NOT_FOUND, PERMISSION_DENIED, DEADLINE_EXCEEDED after
 *   sending, ... are the answer and are thrown.
 *
 * A daemon that failed is marked down for downForMs: calls skip it (no connect timeout
 * paid on every call) unless every daemon is down; after that the next call that prefers
 * it tries it again, and an agent returns to its first choice as soon as it answers.
 */

import { createHash, randomUUID } from "node:crypto";

/** The address as hashed: without an http:// or https:// prefix or a trailing "/". */
export function normalAddress(address: string): string {
  return address.replace(/^https?:\/\//i, "").replace(/\/+$/, "");
}

/** The 8-byte rendezvous weight of `address` for `agentId` (compare as bytes). */
export function weight(address: string, agentId: string): Buffer {
  const hash = createHash("sha256");
  hash.update(Buffer.from(normalAddress(address), "utf8"));
  hash.update(Buffer.from([0]));
  hash.update(Buffer.from(agentId, "utf8"));
  return hash.digest().subarray(0, 8);
}

/** Indexes into `addresses`: the agent's order, first choice first. */
export function rendezvousOrder(addresses: readonly string[], agentId: string): number[] {
  const keyed = addresses.map((address, index) => ({
    index,
    weight: weight(address, agentId),
    name: Buffer.from(normalAddress(address), "utf8"),
  }));
  keyed.sort((a, b) => Buffer.compare(b.weight, a.weight) || Buffer.compare(a.name, b.name));
  return keyed.map((k) => k.index);
}

/** A fresh key for a store or capture that has none: a random UUID. */
export function newIdempotencyKey(): string {
  return randomUUID();
}

/** The list, refused when empty or when two entries name one daemon. */
export function checkAddresses(addresses: readonly string[]): string[] {
  if (addresses.length === 0) throw new TypeError("give at least one daemon address");
  const seen = new Map<string, string>();
  for (const address of addresses) {
    const name = normalAddress(address);
    const before = seen.get(name);
    if (before !== undefined) {
      throw new TypeError(`addresses ${before} and ${address} name the same daemon`);
    }
    seen.set(name, address);
  }
  return [...addresses];
}

/** Which daemons failed lately. */
export class Fleet {
  private readonly downUntil: number[];

  constructor(
    readonly addresses: readonly string[],
    readonly downForMs: number,
  ) {
    this.downUntil = addresses.map(() => 0);
  }

  /** The agent's order with the daemons marked down moved to the end. */
  order(agentId: string): number[] {
    const now = Date.now();
    const order = rendezvousOrder(this.addresses, agentId);
    const up = order.filter((i) => this.downUntil[i]! <= now);
    return [...up, ...order.filter((i) => this.downUntil[i]! > now)];
  }

  markDown(index: number): void {
    this.downUntil[index] = Date.now() + this.downForMs;
  }

  markUp(index: number): void {
    this.downUntil[index] = 0;
  }
}
