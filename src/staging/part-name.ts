/**
 * Names of staging part files:
 *   <schemaKey>.<yyyyMMddHHmm>.<id>.arrows.part   open (being appended)
 *   <schemaKey>.<yyyyMMddHHmm>.<id>.arrows        sealed (immutable)
 * `id` is a ULID, unique per part, so two writers never share a path even for the
 * same schema and minute. Recovery rewrites a torn part under `<id>-r`; the suffix
 * lets a restarted recovery see that a rewrite already happened.
 */
export type MinuteKey = string & { readonly __minuteKey: unique symbol };
export type PartState = 'open' | 'sealed';

export interface PartName {
  readonly schemaKey: string;
  readonly minute: MinuteKey;
  readonly id: string;
  readonly state: PartState;
}

const PATTERN = /^([0-9a-f]{16})\.(\d{12})\.([0-9A-HJKMNP-TV-Z]{26}(?:-r)?)\.arrows(\.part)?$/;
export const SEALED_SUFFIX = '.arrows';
export const OPEN_SUFFIX = '.arrows.part';
const RECOVERED_SUFFIX = '-r';

export function formatPartName(name: Omit<PartName, 'state'>, state: PartState): string {
  return `${name.schemaKey}.${name.minute}.${name.id}${state === 'open' ? OPEN_SUFFIX : SEALED_SUFFIX}`;
}

/** Parses a file name; anything else in a staging directory (plans, temp files) yields undefined. */
export function parsePartName(fileName: string): PartName | undefined {
  const m = PATTERN.exec(fileName);
  if (!m) return undefined;
  return {
    schemaKey: m[1]!,
    minute: m[2]! as MinuteKey,
    id: m[3]!,
    state: m[4] ? 'open' : 'sealed',
  };
}

export const isRecoveredId = (id: string): boolean => id.endsWith(RECOVERED_SUFFIX);
export const recoveredIdOf = (id: string): string => `${id}${RECOVERED_SUFFIX}`;
export const originalIdOf = (id: string): string =>
  isRecoveredId(id) ? id.slice(0, -RECOVERED_SUFFIX.length) : id;

/**
 * The UTC minute of an instant, as used in part names. Only years 0000-9999 fit the
 * 12-digit key that parsePartName reads back: a longer key would name a part that is
 * committed but never found again. The decoder refuses such times (a dead letter,
 * src/decode/timestamp.ts); reaching here with one is a bug, so it throws.
 */
export function minuteKeyOf(epochMs: number): MinuteKey {
  const d = new Date(epochMs);
  const year = d.getUTCFullYear();
  if (Number.isNaN(year) || year < 0 || year > 9999)
    throw new RangeError(`not a time in years 0000-9999: ${epochMs}`);
  const p = (n: number, w = 2) => String(n).padStart(w, '0');
  return `${p(year, 4)}${p(d.getUTCMonth() + 1)}${p(d.getUTCDate())}${p(d.getUTCHours())}${p(d.getUTCMinutes())}` as MinuteKey;
}
