import { CompressionCodecs, CompressionTypes } from 'kafkajs';
import {
  DecompressedSizeOverCapError,
  MAX_DECOMPRESSED_BATCH_BYTES,
  type BatchCodec,
  type CompressionName,
} from './codec';
import {
  CorruptCompressedBatchError,
  batchCrcMatches,
  batchOffsets,
  batchLastOffsetDelta,
  batchRecordCount,
  enclosingBatch,
} from './corrupt-batch';
import { fetchExpansion } from './expansion';
import { misframedBatches } from './misframed-batches';
import { frameRecords } from './record-framing';
import { gzipCodec } from './gzip';
import { lz4Codec } from './lz4';
import { snappyCodec } from './snappy';
import { zstdCodec } from './zstd';

const CODECS: Record<Exclude<CompressionName, 'none'>, { type: CompressionTypes; codec: BatchCodec }> = {
  gzip: { type: CompressionTypes.GZIP, codec: gzipCodec },
  snappy: { type: CompressionTypes.Snappy, codec: snappyCodec },
  lz4: { type: CompressionTypes.LZ4, codec: lz4Codec },
  zstd: { type: CompressionTypes.ZSTD, codec: zstdCodec },
};

/** kafkajs's value for a codec name (`--compression`, `deadLetter.compression`). */
export function compressionType(name: CompressionName): CompressionTypes {
  return name === 'none' ? CompressionTypes.None : CODECS[name].type;
}

/** kafkajs's codec shape: compress takes its Encoder, decompress a records section. */
interface KafkajsCodec {
  compress(encoder: { buffer: Buffer }): Promise<Buffer>;
  decompress(compressed: Buffer): Promise<Buffer>;
}

/**
 * One codec as kafkajs calls it, checking each batch's CRC and naming a corrupt one; a
 * batch over the decompressed-size cap is refused as a corrupt one (its partition stops).
 * The records come back framed as the broker read them (record-framing.ts).
 */
export function kafkajsCodec(
  name: Exclude<CompressionName, 'none'>,
  codec: BatchCodec,
  maxBytes = MAX_DECOMPRESSED_BATCH_BYTES,
): KafkajsCodec {
  const type = CODECS[name].type;
  return {
    compress: (encoder) => codec.compress(encoder.buffer),
    async decompress(compressed) {
      const batch = enclosingBatch(compressed, type);
      const offsets = batch ? batchOffsets(batch) : undefined;
      if (batch && !batchCrcMatches(batch))
        throw new CorruptCompressedBatchError(name, offsets, 'its CRC does not match its bytes');
      let plain: Buffer;
      try {
        plain = await codec.decompress(compressed, maxBytes);
        if (plain.length > maxBytes) throw new DecompressedSizeOverCapError(maxBytes, plain.length);
        fetchExpansion.observe(compressed.length, plain.length);
      } catch (error) {
        if (error instanceof DecompressedSizeOverCapError)
          throw new CorruptCompressedBatchError(name, offsets, error.message, error);
        const detail = `the ${name} codec cannot read it (${error instanceof Error ? error.message : String(error)})`;
        throw new CorruptCompressedBatchError(name, offsets, detail, error);
      }
      // A legacy message set (no batch header) has no record lengths to disagree with.
      if (!batch || !offsets) return plain;
      const framing = frameRecords(plain, batchRecordCount(batch), batchLastOffsetDelta(batch));
      if (framing.kind === 'as-written') return plain;
      if (framing.kind === 'unreadable')
        throw new CorruptCompressedBatchError(
          name,
          offsets,
          `its records do not read as its header says (${framing.detail})`,
        );
      misframedBatches.noted(framing.records, {
        codec: name,
        firstOffset: offsets.first,
        lastOffset: offsets.last,
        misframed: framing.misframed,
      });
      return framing.records;
    },
  };
}

let registered = false;

/**
 * Registers every codec with kafkajs, once per process: kafkajs keeps them in one
 * module-level table that all its clients share (consumer, producers, admin), and a
 * fetched record batch is decompressed by the codec its attributes name. Staging
 * worker threads never see a batch (kafkajs decodes fetches on the main thread, the
 * workers get decoded records), so they register nothing.
 */
export function registerCompressionCodecs(): void {
  if (registered) return;
  for (const [name, { type, codec }] of Object.entries(CODECS) as [
    Exclude<CompressionName, 'none'>,
    (typeof CODECS)[keyof typeof CODECS],
  ][]) {
    const wrapped = kafkajsCodec(name, codec);
    (CompressionCodecs as Record<number, () => KafkajsCodec>)[type] = () => wrapped;
  }
  registered = true;
}
