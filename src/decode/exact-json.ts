/**
 * JSON with exact integers. `JSON.parse` turns 12345678901234567891 into
 * 12345678901234567000 without a word, and Node 20's reviver does not see the
 * source text, so a record whose text could hold such an integer is read again by
 * the small reader below, which keeps every integer literal beyond
 * Number.MAX_SAFE_INTEGER as a BigInt. Everything else is what `JSON.parse` gives:
 * the same values, key order, last-duplicate-wins, and `__proto__` as a plain own key.
 *
 * Only integer literals become BigInt: `1e20` and `1.5` are floats in the text and
 * stay numbers. Columns then decide: int64 and timestamps take them exactly, float64
 * only when the double is exact, `json` writes their digits back (stringifyJsonExact).
 */

/**
 * Whether UTF-8 JSON bytes may hold an integer literal that `JSON.parse` could round:
 * a run of 16 or more ASCII digits (every integer up to 999,999,999,999,999 is a safe
 * integer) that is not next to a double quote. In valid JSON a number token never
 * touches a quote, so a run bordered by one is inside a string (trace ids, numeric ids
 * sent as strings) and needs no exact read. Without such a run, `JSON.parse` gives the
 * same values as `parseJsonExact` (the reader keeps only integer literals of 16+
 * characters as BigInt; fractions and exponents stay the doubles JSON.parse makes).
 * A true answer only costs time: the caller then takes `parseJsonExact`.
 *
 * It probes every 16th byte while no digit is seen, so a typical record costs a few
 * dozen byte reads (`/\d{16}/` on the text read every character and cost more than
 * parseJsonExact's walk of the parsed values). UTF-8 multi-byte sequences never hold
 * an ASCII byte, so the bytes can be scanned before they are decoded.
 */
export function mayHoldUnsafeInteger(bytes: Uint8Array): boolean {
  const n = bytes.length;
  // Invariant: no run of LONG_RUN digits ends before index `i`.
  let i = LONG_RUN - 1;
  while (i < n) {
    if (!isDigit(bytes[i]!)) {
      i += LONG_RUN;
      continue;
    }
    let start = i;
    while (start > 0 && isDigit(bytes[start - 1]!)) start -= 1;
    let end = i + 1;
    while (end < n && isDigit(bytes[end]!)) end += 1;
    if (end - start >= LONG_RUN && bytes[start - 1] !== QUOTE && bytes[end] !== QUOTE) return true;
    i = end + LONG_RUN;
  }
  return false;
}

const LONG_RUN = 16;
const QUOTE = 0x22;
const isDigit = (byte: number) => byte - 0x30 < 10 && byte >= 0x30;

const NUMBER = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;
const INTEGER = /^-?\d+$/;
const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);

/** Parses JSON like `JSON.parse` (and throws its SyntaxError), keeping big integers exact. */
export function parseJsonExact(text: string): unknown {
  const value: unknown = JSON.parse(text);
  // The fast path covers nearly every record: only a number beyond 2^53 can have been rounded.
  // The reader below then runs on text already known valid. (Walking the parsed values
  // costs ~15% of JSON.parse for a typical log record, less than a /\d{16}/ scan of the text.)
  try {
    return hasUnsafeNumber(value) ? new ExactReader(text).read() : value;
  } catch (error) {
    if (error instanceof RangeError) throw new SyntaxError('JSON nested too deeply to read exactly');
    throw error;
  }
}

const MAX_SAFE_NUMBER = Number.MAX_SAFE_INTEGER;

/** Whether a parsed container holds a number beyond 2^53 (written to stay cheap on the hot path). */
function hasUnsafeNumber(value: unknown): boolean {
  if (typeof value !== 'object' || value === null) return typeof value === 'number' && isUnsafe(value);
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) if (holdsUnsafe(value[i])) return true;
    return false;
  }
  const record = value as Record<string, unknown>;
  for (const key in record) if (holdsUnsafe(record[key])) return true;
  return false;
}

const isUnsafe = (n: number) => n > MAX_SAFE_NUMBER || n < -MAX_SAFE_NUMBER;
const holdsUnsafe = (v: unknown): boolean =>
  typeof v === 'number' ? isUnsafe(v) : typeof v === 'object' && v !== null && hasUnsafeNumber(v);

class ExactReader {
  #at = 0;

  constructor(private readonly text: string) {}

  read(): unknown {
    return this.#value();
  }

  #value(): unknown {
    this.#space();
    const c = this.text.charCodeAt(this.#at);
    switch (c) {
      case 0x7b /* { */:
        return this.#object();
      case 0x5b /* [ */:
        return this.#array();
      case 0x22 /* " */:
        return this.#string();
      case 0x74 /* t */:
        this.#at += 4;
        return true;
      case 0x66 /* f */:
        this.#at += 5;
        return false;
      case 0x6e /* n */:
        this.#at += 4;
        return null;
      default:
        return this.#number();
    }
  }

  #object(): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    this.#at += 1;
    this.#space();
    if (this.text.charCodeAt(this.#at) === 0x7d) {
      this.#at += 1;
      return out;
    }
    for (;;) {
      this.#space();
      const key = this.#string();
      this.#space();
      this.#at += 1; // ':'
      // defineProperty, not assignment: a "__proto__" key is data, as JSON.parse makes it.
      Object.defineProperty(out, key, {
        value: this.#value(),
        enumerable: true,
        writable: true,
        configurable: true,
      });
      this.#space();
      const c = this.text.charCodeAt(this.#at);
      this.#at += 1;
      if (c === 0x7d) return out;
    }
  }

  #array(): unknown[] {
    const out: unknown[] = [];
    this.#at += 1;
    this.#space();
    if (this.text.charCodeAt(this.#at) === 0x5d) {
      this.#at += 1;
      return out;
    }
    for (;;) {
      out.push(this.#value());
      this.#space();
      const c = this.text.charCodeAt(this.#at);
      this.#at += 1;
      if (c === 0x5d) return out;
    }
  }

  /** The string token's end is found here; its escapes are left to JSON.parse. */
  #string(): string {
    const start = this.#at;
    this.#at += 1;
    for (;;) {
      const c = this.text.charCodeAt(this.#at);
      if (c === 0x22) break;
      this.#at += c === 0x5c ? 2 : 1;
    }
    this.#at += 1;
    return JSON.parse(this.text.slice(start, this.#at)) as string;
  }

  #number(): number | bigint {
    NUMBER.lastIndex = this.#at;
    const token = NUMBER.exec(this.text)![0];
    this.#at += token.length;
    if (token.length >= 16 && INTEGER.test(token)) {
      const big = BigInt(token);
      if (big > MAX_SAFE || big < -MAX_SAFE) return big;
    }
    return Number(token);
  }

  #space(): void {
    for (;;) {
      const c = this.text.charCodeAt(this.#at);
      if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) return;
      this.#at += 1;
    }
  }
}

/**
 * `JSON.stringify`, except that a BigInt is written as its digits (JSON.stringify
 * throws on one). Values without a BigInt take JSON.stringify itself.
 */
export function stringifyJsonExact(value: unknown): string | undefined {
  try {
    return JSON.stringify(value);
  } catch (error) {
    if (!(error instanceof TypeError)) throw error;
  }
  return write(value, '');
}

function write(input: unknown, key: string): string | undefined {
  let value = input;
  if (typeof value === 'object' && value !== null && 'toJSON' in value && typeof value.toJSON === 'function')
    value = (value.toJSON as (key: string) => unknown)(key);
  if (typeof value === 'bigint') return value.toString();
  if (typeof value !== 'object' || value === null) return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map((v, i) => write(v, String(i)) ?? 'null').join(',')}]`;
  const parts: string[] = [];
  for (const [k, v] of Object.entries(value)) {
    const s = write(v, k);
    if (s !== undefined) parts.push(`${JSON.stringify(k)}:${s}`);
  }
  return `{${parts.join(',')}}`;
}
