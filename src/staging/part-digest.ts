import { createHash, type Hash } from 'node:crypto';

/**
 * The checksum a part carries in itself (issue 13, item 5). Arrow IPC has no checksum of
 * its own, and a bit flipped in a value buffer still decodes: without one, a part that
 * rotted on disk between its fsync and its publication would be published with the
 * wrong value. So a sealed part ends with a trailer after the end-of-stream marker:
 * `KLSHA256` and the SHA-256 of every byte before the trailer. Arrow readers stop at
 * end-of-stream and never see it; ours verify it before anything is planned.
 *
 * A sealed part without a trailer (staged before this format) is still read as is: a
 * trailer lost whole (a truncation exactly at its start) leaves an intact stream.
 */
const MAGIC = Buffer.from('KLSHA256', 'latin1');
export const DIGEST_TRAILER_BYTES = MAGIC.byteLength + 32;

/** The trailer for a stream whose bytes (end-of-stream included) hashed to `hash`. */
export function digestTrailer(hash: Hash): Uint8Array {
  return Buffer.concat([MAGIC, hash.digest()]);
}

export type TrailerCheck =
  | { readonly kind: 'verified' }
  | { readonly kind: 'absent' }
  | { readonly kind: 'invalid'; readonly reason: string };

/** Checks the bytes after a stream's end-of-stream (`streamEnd` = where it ends). */
export function checkDigestTrailer(bytes: Uint8Array, streamEnd: number): TrailerCheck {
  const trailing = bytes.byteLength - streamEnd;
  if (trailing === 0) return { kind: 'absent' };
  if (trailing !== DIGEST_TRAILER_BYTES)
    return { kind: 'invalid', reason: `${trailing} bytes after end-of-stream` };
  const trailer = bytes.subarray(streamEnd);
  if (!MAGIC.equals(trailer.subarray(0, MAGIC.byteLength)))
    return { kind: 'invalid', reason: `${trailing} bytes after end-of-stream, not a checksum trailer` };
  const digest = createHash('sha256').update(bytes.subarray(0, streamEnd)).digest();
  return digest.equals(trailer.subarray(MAGIC.byteLength))
    ? { kind: 'verified' }
    : { kind: 'invalid', reason: 'the checksum trailer does not match the bytes (bit rot or a torn write)' };
}
