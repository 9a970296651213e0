import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import fc from 'fast-check';
import { PartCorruptError } from '../../src/common/errors';
import { silentLogger } from '../../src/common/logger';
import { recordOffset } from '../../src/common/offsets';
import { FileLocks, TableStaging, readSealedPart, recoverTableStaging } from '../../src/staging';
import { END_OF_STREAM, scanStream } from '../../src/staging/ipc-stream';
import { formatPartName, parsePartName } from '../../src/staging/part-name';
import { MINUTE, payloadOf, range, rowsFor } from '../support/rows';
import type { PropertyRun } from './decoder-fuzz';
import { newCounts } from './decoder-fuzz';

/**
 * The staging reader fuzzer: a valid part, torn or bit-flipped, is
 * either read as exactly the rows it held (only when nothing but the checksum trailer
 * was lost) or refused with PartCorruptError; as an open part after a crash, recovery
 * never throws and keeps a prefix of whole, unchanged batches, or quarantines it. An open
 * part still being written (no end-of-stream, no checksum) is damaged as well: recovery
 * must end on it with a bounded heap, whatever its metadata claims.
 */
export interface PartDamage {
  readonly kind: 'truncate' | 'flip' | 'overwrite' | 'append';
  readonly at: number;
  readonly bit: number;
  readonly bytes: readonly number[];
}

export const partDamage: fc.Arbitrary<PartDamage> = fc.record({
  kind: fc.constantFrom('truncate' as const, 'flip' as const, 'overwrite' as const, 'append' as const),
  at: fc.nat(),
  bit: fc.integer({ min: 0, max: 7 }),
  bytes: fc.array(fc.integer({ min: 0, max: 255 }), { minLength: 1, maxLength: 16 }),
});

export function damage(original: Uint8Array, d: PartDamage): Uint8Array {
  const at = d.at % original.byteLength;
  switch (d.kind) {
    case 'truncate':
      return original.slice(0, at);
    case 'flip': {
      const out = original.slice();
      out[at]! ^= 1 << d.bit;
      return out;
    }
    case 'overwrite': {
      const out = original.slice();
      d.bytes.forEach((b, i) => {
        if (at + i < out.length) out[at + i] = b;
      });
      return out;
    }
    case 'append':
      return Uint8Array.from([...original, ...d.bytes]);
  }
}

const sameBytes = (a: Uint8Array, b: Uint8Array) => Buffer.from(a).equals(Buffer.from(b));

/** A sealed part of three batches (offsets 0..299 of partition 0) and its bytes. */
export async function samplePart(dir: string): Promise<{ file: string; bytes: Uint8Array }> {
  const staging = await TableStaging.open({
    tableDir: dir,
    table: 'events',
    locks: new FileLocks(),
    owner: 'fuzz',
    logger: silentLogger(),
    maxPartBytes: 1 << 30,
    maxPartAgeMs: 1 << 30,
    epoch: { owner: 'fuzz', epoch: 1 },
  });
  for (let from = 0; from < 300; from += 100) {
    staging.push({
      topic: 'orders',
      partition: 0,
      batch: rowsFor('orders', 0, range(from, from + 100)),
      minute: MINUTE,
      handledThrough: recordOffset(from + 99),
    });
    await staging.sync();
  }
  const { sealed } = await staging.close();
  const file = sealed[0]!.path;
  return { file, bytes: new Uint8Array(await fsp.readFile(file)) };
}

async function rowsOf(file: string): Promise<{ offset: number; message: string | null }[]> {
  const { batches } = await readSealedPart(file);
  return batches.flatMap((b) =>
    Array.from({ length: b.numRows }, (_, i) => ({
      offset: Number(b.getChild('_offset')!.get(i) as bigint),
      message: b.getChild('message')!.get(i) as string | null,
    })),
  );
}

/** Rows 0..n-1 of the sample, unchanged: what a reader of a damaged part may at most return. */
function expectPrefixUnchanged(
  rows: readonly { offset: number; message: string | null }[],
  all: number,
): void {
  if (rows.length > all) throw new Error(`${rows.length} rows from a part of ${all}`);
  rows.forEach((r, i) => {
    if (r.offset !== i || r.message !== payloadOf('orders', 0, i))
      throw new Error(`row ${i} changed: offset ${r.offset}, ${JSON.stringify(r.message)}`);
  });
}

export async function fuzzParts(numRuns: number, seed: number, workDir: string): Promise<PropertyRun[]> {
  const base = path.join(workDir, 'parts-fuzz');
  await fsp.mkdir(base, { recursive: true });
  const { file, bytes } = await samplePart(path.join(base, 'sample'));
  const name = parsePartName(path.basename(file))!;
  const results: PropertyRun[] = [];
  let n = 0;

  const sealedCounts = newCounts();
  const sealed = await fc.check(
    fc.asyncProperty(partDamage, async (d) => {
      const damaged = damage(bytes, d);
      sealedCounts.records += 1;
      if (sameBytes(damaged, bytes)) return;
      const dir = path.join(base, `sealed-${n++}`);
      await fsp.mkdir(dir, { recursive: true });
      const target = path.join(dir, path.basename(file));
      await fsp.writeFile(target, damaged);
      try {
        const rows = await rowsOf(target);
        // Only a part that lost nothing but its checksum trailer may still be read: whole.
        if (rows.length !== 300) throw new Error(`a damaged part was read as ${rows.length} rows`);
        expectPrefixUnchanged(rows, 300);
        sealedCounts.valid += 1;
      } catch (error) {
        if (!(error instanceof PartCorruptError)) throw error;
        sealedCounts.deadLetters['schema-mismatch'] = 0;
        sealedCounts.rows += 1; // refused
      } finally {
        await fsp.rm(dir, { recursive: true, force: true });
      }
    }),
    { numRuns, seed },
  );
  results.push(
    runOf(
      'sealed part reader: damaged parts are refused (PartCorruptError), never read as other rows',
      sealed,
      seed,
      sealedCounts,
    ),
  );

  // An open part as a live writer leaves it has no end-of-stream and no checksum trailer:
  // recovery then reads damage that no checksum can vouch for, the schema message's included.
  const unsealed = bytes.subarray(0, scanStream(bytes).validLength - END_OF_STREAM.byteLength);
  const openCounts = newCounts();
  const open = await fc.check(
    fc.asyncProperty(partDamage, fc.boolean(), async (d, sealedBytes) => {
      const damaged = damage(sealedBytes ? bytes : unsealed, d);
      openCounts.records += 1;
      const dir = path.join(base, `open-${n++}`);
      await fsp.mkdir(dir, { recursive: true });
      await fsp.writeFile(path.join(dir, formatPartName(name, 'open')), damaged);
      try {
        const report = await recoverTableStaging({
          tableDir: dir,
          locks: new FileLocks(),
          owner: 'recovery',
          logger: silentLogger(),
        });
        if (report.quarantined.length > 0) {
          openCounts.rows += 1;
          return;
        }
        const sealedNames = (await fsp.readdir(dir)).filter((f) => parsePartName(f)?.state === 'sealed');
        if (sealedNames.length > 1) throw new Error(`recovery left ${sealedNames.length} sealed parts`);
        if ((await fsp.readdir(dir)).some((f) => parsePartName(f)?.state === 'open'))
          throw new Error('recovery left an open part');
        const rows = sealedNames.length === 0 ? [] : await rowsOf(path.join(dir, sealedNames[0]!));
        // Without a trailer a flipped value bit cannot be told from the value written; what
        // recovery owes such a part is to end, and to seal only what reads back whole.
        if (sealedBytes) expectPrefixUnchanged(rows, 300);
        else if (rows.length > 300) throw new Error(`${rows.length} rows from a part of 300`);
        openCounts.valid += 1;
      } finally {
        await fsp.rm(dir, { recursive: true, force: true });
      }
    }),
    { numRuns, seed: seed + 1 },
  );
  results.push(
    runOf(
      'recovery of a damaged open part, sealed or still being written: a prefix of unchanged rows, or quarantined; never a throw',
      open,
      seed + 1,
      openCounts,
    ),
  );
  await fsp.rm(base, { recursive: true, force: true });
  return results;
}

function runOf(
  name: string,
  details: fc.RunDetails<[PartDamage]> | fc.RunDetails<[PartDamage, boolean]>,
  seed: number,
  counts: ReturnType<typeof newCounts>,
): PropertyRun {
  return {
    name,
    runs: details.numRuns,
    failed: details.failed,
    seed,
    counts,
    ...(details.failed
      ? {
          counterexample: fc.stringify(details.counterexample),
          error:
            details.errorInstance instanceof Error
              ? details.errorInstance.message
              : String(details.errorInstance),
        }
      : {}),
  };
}
