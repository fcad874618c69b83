/**
 * The SDK's own log lines: hclog JSON on the real stderr (file descriptor 2), which tether and
 * go-plugin hosts parse (`@level`, `@message`, `@timestamp` with six fractional digits, other
 * keys as fields). Written synchronously to the descriptor, so they never go through the
 * `GRPCStdio` relay and are never lost when the process exits.
 *
 * @module
 */

import { writeSync } from "node:fs";

/** hclog's levels. */
export type Level = "trace" | "debug" | "info" | "warn" | "error";

const ORDER: Record<Level, number> = { trace: 0, debug: 1, info: 2, warn: 3, error: 4 };

/** Lines below this level are dropped. */
let threshold: Level = "info";

/** Sets the lowest level written (default `info`). */
export function setLogLevel(level: Level): void {
  threshold = level;
}

/** An hclog timestamp: RFC 3339 with exactly six fractional digits. */
export function hclogTimestamp(date: Date): string {
  const iso = date.toISOString(); // …T12:34:56.789Z
  return `${iso.slice(0, 23)}000Z`;
}

/** The hclog JSON line (newline included) for one message. */
export function hclogLine(level: Level, message: string, fields: Record<string, unknown> = {}, now = new Date()): string {
  const record: Record<string, unknown> = {
    "@level": level,
    "@message": message,
    "@module": "tether-plugin",
    "@timestamp": hclogTimestamp(now),
  };
  for (const [key, value] of Object.entries(fields)) {
    if (!key.startsWith("@")) record[key] = value;
  }
  return `${JSON.stringify(record)}\n`;
}

/** Writes one log line to file descriptor 2. */
export function log(level: Level, message: string, fields: Record<string, unknown> = {}): void {
  if (ORDER[level] < ORDER[threshold]) return;
  try {
    writeSync(2, hclogLine(level, message, fields));
  } catch {
    // The host closed stderr: nobody is left to read the line.
  }
}
