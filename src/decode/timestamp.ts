import type { EpochUnit } from '../config';

/**
 * Timestamps as kafka-lance reads them, into epoch milliseconds (the staged column
 * is Timestamp(ms), and event-time minutes are cut from the same value):
 *
 * - Strings: RFC 3339 / ISO 8601 extended format only,
 *   `YYYY-MM-DD[(T|t| )hh:mm[:ss[(.|,)fraction]][Z|z|±hh[[:]mm]]]`. A string without a
 *   zone is UTC, never the process's local time (which would make the stored instant
 *   depend on the TZ of the replica that happened to decode it). A date alone is its
 *   UTC midnight. Digits below the millisecond are cut (floor). Anything `Date.parse`
 *   would guess at ("1", "March 7", RFC 2822) is refused.
 * - Numbers (and integers beyond 2^53, which the JSON reader keeps as BigInt): epoch
 *   values in the declared unit (`s`, `ms`, `us` or `ns`), converted exactly through
 *   their decimal digits, then floored to the millisecond.
 * - Date objects (from a transform) as they are.
 *
 * Every result must lie in years 0000–9999 UTC: what RFC 3339 can write, what a
 * minute key (`yyyyMMddHHmm`) can hold, and well inside int64 milliseconds. A value
 * outside is refused with a reason, so a microsecond value in a millisecond field is
 * a dead letter instead of a year-57,000 row or a crash.
 */
export type TimestampResult = { readonly ms: number } | { readonly invalid: string };

/** 0000-01-01T00:00:00.000Z */
export const MIN_TIMESTAMP_MS = -62_167_219_200_000;
/** 9999-12-31T23:59:59.999Z */
export const MAX_TIMESTAMP_MS = 253_402_300_799_999;

const RANGE = 'outside years 0000–9999 UTC';
const FORMAT = 'not an RFC 3339 / ISO 8601 timestamp (e.g. 2025-11-30T10:00:00Z)';

const ISO =
  /^(\d{4})-(\d{2})-(\d{2})(?:[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d+))?)?(?:([Zz])|([+-])(\d{2})(?::?(\d{2}))?)?)?$/;

export function parseTimestamp(value: unknown, unit: EpochUnit): TimestampResult {
  if (typeof value === 'string') return parseIsoTimestamp(value);
  if (typeof value === 'number' || typeof value === 'bigint') return epochToMs(value, unit);
  if (value instanceof Date) return inRange(value.getTime(), 'an invalid Date');
  return { invalid: 'not a time' };
}

function parseIsoTimestamp(text: string): TimestampResult {
  const utcMillis = canonicalUtcMs(text);
  return utcMillis !== undefined ? { ms: utcMillis } : parseIsoTimestampByPattern(text);
}

/** Every accepted form, by the regular expression: the reference the canonical fast path is tested against. */
export function parseIsoTimestampByPattern(text: string): TimestampResult {
  const m = ISO.exec(text);
  if (!m) return { invalid: FORMAT };
  const year = Number(m[1]);
  const month = Number(m[2]);
  const day = Number(m[3]);
  const hour = Number(m[4] ?? 0);
  const minute = Number(m[5] ?? 0);
  const second = Number(m[6] ?? 0);
  // 24:00 and leap seconds (:60) are refused: the instant they name is ambiguous to most readers.
  if (month < 1 || month > 12 || day < 1 || day > daysInMonth(year, month)) return { invalid: FORMAT };
  if (hour > 23 || minute > 59 || second > 59) return { invalid: FORMAT };
  let offsetMinutes = 0;
  if (m[9] !== undefined) {
    const oh = Number(m[10]);
    const om = Number(m[11] ?? 0);
    if (oh > 23 || om > 59) return { invalid: FORMAT };
    offsetMinutes = (m[9] === '-' ? -1 : 1) * (oh * 60 + om);
  }
  const fraction = m[7];
  const millis = fraction === undefined ? 0 : Number(fraction.slice(0, 3).padEnd(3, '0'));
  const ms =
    daysFromCivil(year, month, day) * 86_400_000 +
    ((hour * 60 + minute - offsetMinutes) * 60 + second) * 1000 +
    millis;
  return inRange(ms, `"${text}" is`);
}

/**
 * `YYYY-MM-DDThh:mm:ss.sssZ` (what `Date#toISOString` and most loggers write) read from
 * its character codes, without the regular expression's match array and digit strings:
 * the usual event-time value, on every record. Anything else, or a field out of range,
 * is undefined and goes to the general parser, which gives the reason. Any such string
 * is within years 0000–9999.
 */
function canonicalUtcMs(text: string): number | undefined {
  if (text.length !== 24) return undefined;
  const sep = text.charCodeAt(10);
  const zone = text.charCodeAt(23);
  if (
    text.charCodeAt(4) !== 0x2d /* - */ ||
    text.charCodeAt(7) !== 0x2d ||
    (sep !== 0x54 /* T */ && sep !== 0x74 /* t */ && sep !== 0x20) ||
    text.charCodeAt(13) !== 0x3a /* : */ ||
    text.charCodeAt(16) !== 0x3a ||
    text.charCodeAt(19) !== 0x2e /* . */ ||
    (zone !== 0x5a /* Z */ && zone !== 0x7a) /* z */
  )
    return undefined;
  const year = digits(text, 0, 4);
  const month = digits(text, 5, 2);
  const day = digits(text, 8, 2);
  const hour = digits(text, 11, 2);
  const minute = digits(text, 14, 2);
  const second = digits(text, 17, 2);
  const millis = digits(text, 20, 3);
  // NaN (a non-digit) fails every comparison below.
  if (!(month >= 1 && month <= 12 && day >= 1 && day <= daysInMonth(year, month))) return undefined;
  if (!(hour <= 23 && minute <= 59 && second <= 59 && millis >= 0 && year >= 0)) return undefined;
  return daysFromCivil(year, month, day) * 86_400_000 + ((hour * 60 + minute) * 60 + second) * 1000 + millis;
}

/** The decimal value of `length` ASCII digits at `start`; NaN if any is not a digit. */
function digits(text: string, start: number, length: number): number {
  let value = 0;
  for (let i = start; i < start + length; i++) {
    const d = text.charCodeAt(i) - 0x30;
    if (d < 0 || d > 9) return NaN;
    value = value * 10 + d;
  }
  return value;
}

/**
 * Exact through the number's decimal digits: `1764496800123999999` ns is 1764496800123
 * ms, where a double multiplication would round it up to ...124.
 */
function epochToMs(value: number | bigint, unit: EpochUnit): TimestampResult {
  if (unit === 'ms' && Number.isSafeInteger(value)) return inRange(value as number, `${value} ms is`);
  const scaled = epochTo(value, unit, 'ms');
  return 'invalid' in scaled ? scaled : { ms: Number(scaled.value) };
}

/** Decimal digits below the second of each unit. */
const DIGITS: Readonly<Record<EpochUnit, number>> = { s: 0, ms: 3, us: 6, ns: 9 };
const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;

export type TimeResult = { readonly value: bigint } | { readonly invalid: string };

/**
 * A time in a stored unit other than ms (declared `timestamp` fields with `unit`): the
 * same inputs as parseTimestamp, but string fractions and numbers keep their digits down
 * to `target` (floored below it). The range is years 0000–9999 as above, and for `ns`
 * also int64 (1677-09-21 to 2262-04-11), Arrow's storage.
 */
export function parseTimestampIn(value: unknown, unit: EpochUnit, target: EpochUnit): TimeResult {
  let result: TimeResult;
  if (typeof value === 'string') {
    const time = parseIsoTimestamp(value);
    if ('invalid' in time) return time;
    const fraction = ISO.exec(value)![7] ?? '';
    const below = DIGITS[target] - 3;
    result =
      below < 0
        ? { value: floorDiv(BigInt(time.ms), 1000n) }
        : {
            value:
              BigInt(time.ms) * 10n ** BigInt(below) +
              BigInt(fraction.slice(3, 3 + below).padEnd(below, '0') || '0'),
          };
  } else if (typeof value === 'number' || typeof value === 'bigint') {
    result = epochTo(value, unit, target);
  } else if (value instanceof Date) {
    const time = inRange(value.getTime(), 'an invalid Date');
    if ('invalid' in time) return time;
    const shift = DIGITS[target] - 3;
    result = {
      value: shift >= 0 ? BigInt(time.ms) * 10n ** BigInt(shift) : floorDiv(BigInt(time.ms), 1000n),
    };
  } else return { invalid: 'not a time' };
  if ('invalid' in result) return result;
  return result.value >= INT64_MIN && result.value <= INT64_MAX
    ? result
    : { invalid: `${String(value)} is outside int64 ${target} (years 1677–2262 for ns)` };
}

/** An epoch number in `unit` as a count of `target` units: exact through its decimal digits, floored below `target`, within years 0000–9999. */
function epochTo(value: number | bigint, unit: EpochUnit, target: EpochUnit): TimeResult {
  if (typeof value === 'number' && !Number.isFinite(value))
    return { invalid: Number.isNaN(value) ? 'NaN is not a time' : `${value} is ${RANGE}` };
  const d = /^(-?)(\d+)(?:\.(\d+))?(?:e([+-]?\d+))?$/.exec(String(value));
  if (!d) return { invalid: `${String(value)} is not a time` };
  const fraction = d[3] ?? '';
  let mantissa = BigInt(`${d[1]}${d[2]}${fraction}`);
  const exponent = Number(d[4] ?? 0) - fraction.length + DIGITS[target] - DIGITS[unit];
  if (exponent > 40)
    return mantissa === 0n ? { value: 0n } : { invalid: `${String(value)} ${unit} is ${RANGE}` };
  if (exponent < -400) mantissa = mantissa < 0n ? -1n : 0n;
  else if (exponent >= 0) mantissa *= 10n ** BigInt(exponent);
  else mantissa = floorDiv(mantissa, 10n ** BigInt(-exponent));
  const shift = DIGITS[target] - 3;
  const ms = shift >= 0 ? floorDiv(mantissa, 10n ** BigInt(shift)) : mantissa * 1000n;
  if (ms < BigInt(MIN_TIMESTAMP_MS) || ms > BigInt(MAX_TIMESTAMP_MS))
    return { invalid: `${String(value)} ${unit} is ${RANGE}` };
  return { value: mantissa };
}

/** 0000-01-01 and 9999-12-31 as days since 1970-01-01. */
const MIN_DAY = -719_528;
const MAX_DAY = 2_932_896;

/**
 * A `date` column's value (days since 1970-01-01): a `YYYY-MM-DD` string (nothing
 * after it: a time would be cut without a word), or an integer number of days.
 */
export function parseDate(value: unknown): { readonly days: number } | { readonly invalid: string } {
  if (typeof value === 'string') {
    const m = /^(\d{4})-(\d{2})-(\d{2})$/.exec(value);
    if (!m) return { invalid: `"${value.slice(0, 40)}" is not a date (YYYY-MM-DD)` };
    const [year, month, day] = [Number(m[1]), Number(m[2]), Number(m[3])];
    if (month < 1 || month > 12 || day < 1 || day > daysInMonth(year, month))
      return { invalid: `"${value}" is not a date` };
    return { days: daysFromCivil(year, month, day) };
  }
  if (typeof value === 'number' && Number.isInteger(value))
    return value >= MIN_DAY && value <= MAX_DAY ? { days: value } : { invalid: `${value} days is ${RANGE}` };
  return { invalid: 'not a date (YYYY-MM-DD or days since 1970-01-01)' };
}

function inRange(ms: number, what: string): TimestampResult {
  if (Number.isNaN(ms)) return { invalid: `${what} not a time` };
  return ms >= MIN_TIMESTAMP_MS && ms <= MAX_TIMESTAMP_MS ? { ms } : { invalid: `${what} ${RANGE}` };
}

function floorDiv(a: bigint, b: bigint): bigint {
  const q = a / b;
  return a % b !== 0n && a < 0n ? q - 1n : q;
}

function daysInMonth(year: number, month: number): number {
  if (month === 2) return year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0) ? 29 : 28;
  return month === 4 || month === 6 || month === 9 || month === 11 ? 30 : 31;
}

/** Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil): no Date, no time zone. */
function daysFromCivil(year: number, month: number, day: number): number {
  const y = month <= 2 ? year - 1 : year;
  const era = Math.floor(y / 400);
  const yoe = y - era * 400;
  const doy = Math.floor((153 * (month + (month > 2 ? -3 : 9)) + 2) / 5) + day - 1;
  const doe = yoe * 365 + Math.floor(yoe / 4) - Math.floor(yoe / 100) + doy;
  return era * 146_097 + doe - 719_468;
}
