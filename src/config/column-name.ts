/**
 * Names Lance can take as top-level columns, and strings UTF-8 can hold. No imports:
 * config validation (declared field names) and the decoder (inferred keys) share it.
 */

/**
 * False when the string holds a lone UTF-16 surrogate (a "\ud800" escape, or a
 * transform's output): UTF-8 cannot store one, and TextEncoder would write U+FFFD.
 * String.prototype.isWellFormed (ES2024, Node 20) is ~15× faster than a /\p{Cs}/u
 * test on the hot path; lib ES2023 does not declare it yet.
 */
export const isWellFormed = (s: string): boolean =>
  (s as unknown as { isWellFormed(): boolean }).isWellFormed();

/** Why Lance cannot take `name` as a top-level column (measured with LanceDB 0.39; see RecordDecoder), or undefined. */
export function columnNameProblem(name: string): string | undefined {
  if (name === '') return 'an empty name cannot be a Lance column';
  if (name.startsWith('_')) return 'names starting with "_" are reserved for kafka-lance columns';
  if (name.includes('.')) return 'Lance reads "." in a column name as a nested field';
  if (name.includes('`')) return 'Lance cannot append to a column whose name holds "`"';
  if (!isWellFormed(name)) return 'a lone UTF-16 surrogate cannot be stored in a column name';
  return undefined;
}
