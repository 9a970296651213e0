import type * as lancedb from '@lancedb/lancedb';

/**
 * Checks `probe` out at the table's newest version and returns it: the newer of the
 * listed newest version and `from` (a version this process saw), then every next
 * version read by its number (`checkout(n)` reads `_versions/<n>.manifest` by name: a
 * HEAD, no LIST) until one does not exist.
 *
 * Why not the listed newest alone: a listing of `_versions/` can come back short
 * (s3proxy's filesystem backend does under concurrent PUTs) and show an older version.
 * A count on it misses an add that did commit, and an add counted as absent is added
 * again: a duplicate. Versions above the listed one are numbered without gaps (each
 * commit creates the next number, put-if-absent; a cleanup removes only versions below
 * the newest, and only those a listing showed it), so the walk reaches the newest
 * whatever a listing hides. Starting no lower than the listed version keeps it off
 * versions a cleanup removed since `from`.
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
  if (!checkedOut) await probe.checkout(newest);
  return newest;
}

/**
 * Lance's answer to a checkout of a version whose manifest does not exist: it tries the
 * V2 name (u64::MAX - version, 20 digits), then the V1 name (the number), and reports
 * the last one it tried. Any other failure (the store unreachable) is not an answer.
 */
function isMissingVersion(error: unknown, version: number): boolean {
  const text = error instanceof Error ? error.message : String(error);
  const v2 = (2n ** 64n - 1n - BigInt(version)).toString().padStart(20, '0');
  return new RegExp(`_versions/(${version}|${v2})\\.manifest was not found`).test(text);
}
