import type * as lancedb from '@lancedb/lancedb';
import { isMissingVersion } from './lance-errors';

/**
 * Checks `probe` out at the table's newest version and returns it: the newer of the
 * listed newest version and `from` (a version this process saw), then every next
 * version read by its number (`checkout(n)` reads `_versions/<n>.manifest` by name, or
 * asks the DynamoDB commit table for it: no LIST) until one does not exist.
 *
 * Why not the listed newest alone: a listing of `_versions/` can come back short
 * (s3proxy's filesystem backend does under concurrent PUTs) and show an older version.
 * A count on it misses an add that did commit, and an add counted as absent is added
 * again: a duplicate. Each commit creates the next number (put-if-absent), so the
 * versions above a seen one are there to walk, except those a cleanup removed: it
 * removes versions by their own age, so with writers' clocks apart (or a cleanup under
 * way) a removed version can sit below a kept one and end a walk early. The walk
 * therefore never decides alone: a count it finds low is read again by the caller on a
 * new listing (publication-check.ts), and the highest count is the table's. Starting no lower
 * than the listed version keeps it off the versions a cleanup removed long ago.
 *
 * A `from` that no longer exists and is above the listed version (the table was dropped
 * and created again since) falls back to the listed version.
 *
 * `probe` must be a handle of its own: it is left checked out (time travel) there.
 */
export async function checkoutNewestFrom(probe: lancedb.Table, from: number): Promise<number> {
  const listed = await probe.version();
  let newest = Math.max(from, listed);
  // Pinned by a checkout even when it is the listed one: an open handle on a connection
  // that reads the newest version lists again before each query.
  let checkedOut = false;
  for (;;) {
    try {
      await probe.checkout(newest + 1);
      newest += 1;
      checkedOut = true;
    } catch (error) {
      if (!isMissingVersion(error, newest + 1)) throw error;
      break;
    }
  }
  if (checkedOut) return newest;
  try {
    await probe.checkout(newest);
    return newest;
  } catch (error) {
    if (newest === listed || !isMissingVersion(error, newest)) throw error;
    await probe.checkout(listed);
    return listed;
  }
}
