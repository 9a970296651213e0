/**
 * Replacing one of kafkajs's internal modules with our reproduction of it (its record
 * decoder, its record batch decoder, its consumer Batch: record-batch.ts,
 * record-batch-decoder.ts, consumer-batch.ts), through Node's module cache.
 *
 * A kafkajs module takes what it requires once, when it loads: a replacement must be in the
 * cache before the module that binds it (`boundBy`) loads, and later it changes nothing.
 * Each reproduction mirrors kafkajs 2.2.4's code, so any other release keeps its own.
 */

/** The kafkajs release the replacements reproduce (package.json pins it). */
const KAFKAJS_VERSION = '2.2.4';

/** Whether the installed kafkajs is the release the replacements reproduce. */
export function isReproducedKafkajs(): boolean {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  return (require('kafkajs/package.json') as { version: string }).version === KAFKAJS_VERSION;
}

/** What this process put in place, by resolved module path. */
const replaced = new Map<string, unknown>();

/**
 * Makes `require(modulePath)` give `make(its own exports)` from now on, unless `boundBy`
 * has loaded already (it holds kafkajs's own). Returns whether the replacement is what
 * `require` gives now: true again on a later call once it is in place, false on another
 * kafkajs release or when it came too late.
 */
export function replaceKafkajsModule<T>(modulePath: string, boundBy: string, make: (own: T) => T): boolean {
  if (!isReproducedKafkajs()) return false;
  const path = require.resolve(modulePath);
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const current = () => require(modulePath) as T;
  if (replaced.has(path) && current() === replaced.get(path)) return true;
  if (require.cache[require.resolve(boundBy)] !== undefined) return false;
  const own = current();
  const loaded = require.cache[path];
  if (loaded === undefined) return false;
  const replacement = make(own);
  loaded.exports = replacement;
  replaced.set(path, replacement);
  // A registry whose cache is not where `require` looks would keep kafkajs's module.
  return current() === replacement;
}
