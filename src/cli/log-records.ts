/**
 * Realistic application log records (the shape consumers/app-logs.ts declares), for
 * the demo and the `produce` load generator. Deterministic in the record's sequence
 * number, so a test can tell which records were broken on purpose.
 */
const SERVICES = ['checkout', 'payments', 'search', 'auth', 'inventory', 'shipping'];
// Messages that fit the status: an error line reads like an error.
const MESSAGES: Record<number, readonly string[]> = {
  200: ['request handled', 'cache miss', 'user signed in', 'search served from replica'],
  201: ['order created', 'session created'],
  402: ['payment declined', 'card expired'],
  404: ['item not found', 'route not found'],
  500: [
    'upstream timeout',
    'database connection reset',
    'payment gateway unavailable',
    'unhandled exception',
  ],
};
const STATUSES = [200, 200, 200, 201, 404, 500, 402];
// Padding that reads like log context, not like random bytes (it compresses like real logs).
const FILLER =
  'user_agent=Mozilla/5.0 route=/api/v2/orders/{id} cart_items=3 feature_flags=new-checkout,fast-search ' +
  'upstream=payments.internal:8443 pool=default retries=0 cache=hit region=eu-west-1 build=2026.11.30-4f2a ';

export interface LogRecordOptions {
  /** Share of records that are not JSON at all (0..1): dead letters for any JSON consumer. */
  readonly badRatio: number;
  /** Approximate size of a good record in bytes; the message is padded up to it. 0 or undefined: natural size (~300 B). */
  readonly recordBytes?: number;
}

export interface LogRecord {
  readonly value: string;
  readonly bad: boolean;
  /** Of a good record: its level (info, warn, error). */
  readonly level: string | undefined;
}

/** Whether record `n` (0-based) is broken: exactly floor(count × ratio) of the first `count` are, spread evenly. */
export function isBad(n: number, ratio: number): boolean {
  if (ratio <= 0) return false;
  // The epsilon keeps 0.29 × 100 at 29 despite binary floating point.
  const badUpTo = (k: number) => Math.floor(k * ratio + 1e-9);
  return badUpTo(n + 1) > badUpTo(n);
}

export function badCount(count: number, ratio: number): number {
  return ratio <= 0 ? 0 : Math.floor(count * ratio + 1e-9);
}

/** Record `n` of the stream, stamped `now` (epoch ms). */
export function logRecord(n: number, now: number, options: LogRecordOptions): LogRecord {
  const good = goodRecord(n, now, options.recordBytes ?? 0);
  if (!isBad(n, options.badRatio)) return good;
  // Two kinds of undecodable input: a line that is not JSON, and JSON cut off mid-record.
  const value = n % 2 === 0 ? `plain text line ${n}` : good.value.slice(0, Math.floor(good.value.length / 2));
  return { value, bad: true, level: undefined };
}

function goodRecord(n: number, now: number, recordBytes: number): LogRecord {
  const service = SERVICES[n % SERVICES.length]!;
  const status = STATUSES[n % STATUSES.length]!;
  const level = status >= 500 ? 'error' : status >= 400 ? 'warn' : 'info';
  const record = {
    ts: new Date(now).toISOString(),
    level,
    service,
    host: `${service}-7d9f-${n % 4}`,
    message: MESSAGES[status]![Math.floor(n / STATUSES.length) % MESSAGES[status]!.length]!,
    status,
    latency_ms: Math.round(((n * 7919) % 100_000) / 10) / 10,
    trace_id: (BigInt(n) * 2654435761n).toString(16).padStart(32, '0'),
    attrs: { region: ['eu-west-1', 'us-east-1'][n % 2], attempt: n % 3, seq: n },
  };
  let value = JSON.stringify(record);
  const missing = recordBytes - Buffer.byteLength(value);
  if (missing > 3) {
    const start = n % FILLER.length;
    let pad = '';
    while (pad.length < missing - 3) pad += FILLER;
    record.message = `${record.message} | ${(FILLER.slice(start) + pad).slice(0, missing - 3)}`;
    value = JSON.stringify(record);
  }
  return { value, bad: false, level };
}
