import { MetadataVersion, type Schema } from 'apache-arrow';
import { FileBlock, Footer } from 'apache-arrow/ipc/metadata/file';
import { recordBatchBlocks } from '../staging/ipc-stream';

/**
 * A publication's Arrow IPC file laid over the bytes of its parts, so that LanceDB's add
 * reads the staged bytes themselves: no decode and re-encode, and no second buffer of
 * the publication's size (each one a full mark of the thread's heap: V8 counts the
 * ArrayBuffers that outlive a scavenge against the old generation's limit, and this
 * thread's heap is small; bench/hot-path-levers.md).
 *
 * An IPC file is the magic, messages, a footer that names where each record batch
 * message is, its length and the magic again. A reader follows the footer only, so
 * each part's whole stream (its schema message, end-of-stream marker and checksum
 * trailer included) is read in place at an 8-byte aligned offset and the footer lists
 * the record batches found in them.
 */
const MAGIC = Buffer.from('ARROW1', 'latin1');
/** The magic and its padding to 8 bytes. */
const HEAD_BYTES = 8;
/**
 * Room kept after the parts for the footer: its schema and 24 bytes per record batch
 * (~2,500 batches). A publication of more batches takes the decoded rows instead.
 */
const FOOTER_ROOM_BYTES = 64 * 1024;

/** Where one part's bytes go in the publication's buffer. */
export interface PartSlot {
  readonly offset: number;
  readonly length: number;
}

export interface PublicationLayout {
  readonly slots: readonly PartSlot[];
  /** Bytes the buffer needs: the head, the parts and room for the footer. */
  readonly capacity: number;
}

const align8 = (n: number) => Math.ceil(n / 8) * 8;

/** Slots for parts of these sizes, in plan order. */
export function publicationLayout(partBytes: readonly number[]): PublicationLayout {
  const slots: PartSlot[] = [];
  let at = HEAD_BYTES;
  for (const length of partBytes) {
    slots.push({ offset: at, length });
    at = align8(at + length);
  }
  return { slots, capacity: at + FOOTER_ROOM_BYTES };
}

/** What the reader of a part decoded from it: the file must hold exactly that. */
export interface DecodedPart {
  readonly batches: number;
  readonly rows: number;
}

/**
 * Writes the head and the footer around parts already read into `buffer` at their
 * slots; returns the file's bytes (a view of `buffer`), or undefined when a part is not
 * a plain stream (a dictionary batch, a torn message), its record batches are not the
 * batches and rows `decoded` says were read from it, or the footer does not fit: the
 * caller then encodes the rows it decoded instead. `schema`: the one every part holds
 * (without the parts' metadata, as the decoded batches are given to LanceDB).
 */
export function sealPublicationFile(
  buffer: Buffer,
  layout: PublicationLayout,
  schema: Schema,
  decoded: readonly DecodedPart[],
): Uint8Array | undefined {
  if (decoded.length !== layout.slots.length) return undefined;
  const blocks: FileBlock[] = [];
  let end = HEAD_BYTES;
  for (const [i, slot] of layout.slots.entries()) {
    const found = recordBatchBlocks(buffer.subarray(slot.offset, slot.offset + slot.length));
    if (!found) return undefined;
    // Two readers of the same bytes (apache-arrow's for the checks, this walk for the
    // footer) must agree, or the rows LanceDB reads are not the rows that were checked.
    const rows = found.reduce((n, b) => n + b.rows, 0);
    if (found.length !== decoded[i]!.batches || rows !== decoded[i]!.rows) return undefined;
    for (const b of found) blocks.push(new FileBlock(b.metaDataLength, b.bodyLength, slot.offset + b.offset));
    end = align8(slot.offset + slot.length);
  }
  const footer = Footer.encode(new Footer(schema, MetadataVersion.V5, blocks, []));
  const fileEnd = end + footer.byteLength + 4 + MAGIC.byteLength;
  if (fileEnd > buffer.byteLength) return undefined;
  MAGIC.copy(buffer, 0);
  buffer.fill(0, MAGIC.byteLength, HEAD_BYTES);
  buffer.set(footer, end);
  buffer.writeInt32LE(footer.byteLength, end + footer.byteLength);
  MAGIC.copy(buffer, end + footer.byteLength + 4);
  return buffer.subarray(0, fileEnd);
}
