import { createHash } from 'node:crypto';
import { crc32c } from '@node-rs/crc32';

/**
 * The checksum a part carries in itself. Arrow IPC has no checksum of its own, and a bit
 * flipped in a value buffer still decodes: without one, a part that rotted on disk
 * between its fsync and its publication would be published with the wrong value. So a
 * sealed part ends with a trailer after the end-of-stream marker: `KLCRC32C` and the
 * CRC32C (Castagnoli, as Kafka's record batches use; little-endian) of every byte before
 * the trailer. Arrow readers stop at end-of-stream and never see it; ours verify it
 * before anything is planned.
 *
 * It guards against torn writes and bit rot, not against an attacker: a CRC32C catches
 * every burst of up to 32 flipped bits and misses random damage with odds of 2^-32, and
 * runs at memory speed (SSE4.2 in @node-rs/crc32) where sha256 cost a pass per check.
 *
 * Read as well, never written: the `KLSHA256` trailer (SHA-256, 32 bytes) of parts
 * staged by earlier versions, and no trailer at all (staged before trailers existed; a
 * trailer lost whole, a truncation exactly at its start, leaves such an intact stream).
 */
const CRC_MAGIC = Buffer.from('KLCRC32C', 'latin1');
const SHA_MAGIC = Buffer.from('KLSHA256', 'latin1');
export const DIGEST_TRAILER_BYTES = CRC_MAGIC.byteLength + 4;
const SHA_TRAILER_BYTES = SHA_MAGIC.byteLength + 32;

/** A CRC32C carried across writes: the bytes of a part, in order. */
export class RunningCrc {
  #state = 0;

  update(bytes: Uint8Array): this {
    this.#state = crc32c(bytes, this.#state);
    return this;
  }

  get value(): number {
    return this.#state;
  }

  /** The CRC32C these bytes would extend it to, leaving it as it is. */
  with(bytes: Uint8Array): number {
    return crc32c(bytes, this.#state);
  }
}

/** The trailer for a stream whose bytes (end-of-stream included) have the CRC32C `streamCrc`. */
export function digestTrailer(streamCrc: number): Uint8Array {
  const trailer = Buffer.alloc(DIGEST_TRAILER_BYTES);
  CRC_MAGIC.copy(trailer);
  trailer.writeUInt32LE(streamCrc >>> 0, CRC_MAGIC.byteLength);
  return trailer;
}

/**
 * The checksum plans record for a part and preparation verifies: `crc32c:` and the hex
 * CRC32C of the whole file (trailer included). Plans written by earlier versions hold
 * the SHA-256 hex of the whole file instead; `matchesPartChecksum` checks either.
 */
export function partChecksum(wholeFileCrc: number): string {
  return `crc32c:${(wholeFileCrc >>> 0).toString(16).padStart(8, '0')}`;
}

const LEGACY_SHA256 = /^[0-9a-f]{64}$/;

/** Whether a part file's bytes are the ones a plan recorded (one pass over them). */
export function matchesPartChecksum(bytes: Uint8Array, expected: string): boolean {
  if (LEGACY_SHA256.test(expected)) return createHash('sha256').update(bytes).digest('hex') === expected;
  return partChecksum(crc32c(bytes)) === expected;
}

export type TrailerCheck =
  | {
      readonly kind: 'verified' | 'absent';
      /** `partChecksum` of the whole file, found on the way (no second pass). */
      readonly checksum: string;
    }
  | {
      readonly kind: 'invalid';
      readonly reason: string;
      /**
       * A whole trailer (or more) is there and does not match: the bytes changed after
       * they were written. Otherwise the tail may be a trailer torn by a crash.
       */
      readonly whole: boolean;
    };

/** Checks the bytes after a stream's end-of-stream (`streamEnd` = where it ends). */
export function checkDigestTrailer(bytes: Uint8Array, streamEnd: number): TrailerCheck {
  const trailing = bytes.byteLength - streamEnd;
  if (trailing === 0) return { kind: 'absent', checksum: partChecksum(crc32c(bytes)) };
  const trailer = Buffer.from(bytes.buffer, bytes.byteOffset + streamEnd, trailing);
  const crcMagic =
    trailing >= DIGEST_TRAILER_BYTES && CRC_MAGIC.equals(trailer.subarray(0, CRC_MAGIC.byteLength));
  const mismatch = {
    kind: 'invalid',
    reason: 'the checksum trailer does not match the bytes (bit rot or a torn write)',
    whole: true,
  } as const;
  if (crcMagic && trailing === DIGEST_TRAILER_BYTES) {
    const streamCrc = crc32c(bytes.subarray(0, streamEnd));
    if (trailer.readUInt32LE(CRC_MAGIC.byteLength) !== streamCrc) return mismatch;
    return { kind: 'verified', checksum: partChecksum(crc32c(trailer, streamCrc)) };
  }
  if (trailing === SHA_TRAILER_BYTES && SHA_MAGIC.equals(trailer.subarray(0, SHA_MAGIC.byteLength))) {
    const digest = createHash('sha256').update(bytes.subarray(0, streamEnd)).digest();
    if (!digest.equals(trailer.subarray(SHA_MAGIC.byteLength))) return mismatch;
    return { kind: 'verified', checksum: partChecksum(crc32c(bytes)) };
  }
  const whole = crcMagic || trailing >= SHA_TRAILER_BYTES;
  if (trailing !== DIGEST_TRAILER_BYTES && trailing !== SHA_TRAILER_BYTES)
    return { kind: 'invalid', reason: `${trailing} bytes after end-of-stream`, whole };
  return {
    kind: 'invalid',
    reason: `${trailing} bytes after end-of-stream, not a checksum trailer`,
    whole,
  };
}
