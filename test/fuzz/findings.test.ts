/**
 * What the fuzzers found, each as its minimal counterexample, fixed
 * at the root. Named for the hazard.
 */
import { promises as fsp } from 'node:fs';
import { Message, MessageHeader } from 'apache-arrow';
import * as path from 'node:path';
import { PartCorruptError } from '../../src/common/errors';
import { readSealedPart } from '../../src/staging';
import { column, decodeAll, decoder } from '../decode/fixture';
import {
  TABLE,
  TOPIC,
  openMaterializer,
  ownershipOf,
  readLance,
  stageRows,
} from '../support/materializer-fixture';
import { payloadOf, range, tempDir } from '../support/rows';
import { damage, samplePart } from './part-fuzz';
import { silentLogger } from '../../src/common/logger';
import { FileLocks, recoverTableStaging } from '../../src/staging';
import { formatPartName, parsePartName } from '../../src/staging/part-name';
import { decodeBatches, scanStream } from '../../src/staging/ipc-stream';

describe('fuzz findings', () => {
  test('a float64 written by JavaScript beyond 2^53 (-67482704808384810 is how the double -67482704808384808 prints) is stored, not dead-lettered', () => {
    const d = decoder({ fields: [{ name: 'ratio', type: 'float64', nullable: true }] });
    const out = decodeAll(d, [
      `{"ratio":${JSON.stringify(-67482704808384808)}}`,
      '{"ratio":9007199254740993}',
    ]);
    expect(JSON.stringify(-67482704808384808)).toBe('-67482704808384810');
    expect(column(out.batch!, 'ratio')).toEqual([-67482704808384808]);
    // A literal that is no double's text (it would round) is still refused: exactly or not at all.
    expect(out.deadLetters.map((v) => [v.offset, v.reason])).toEqual([[1, 'schema-mismatch']]);
  });
});

describe('fuzz findings: parts', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await tempDir('kl-findings');
  });
  afterEach(async () => {
    await fsp.rm(dir, { recursive: true, force: true });
  });

  /** Flips bit 0 of the first byte of `needle` in the file (a value buffer byte: the stream still decodes). */
  async function flipIn(file: string, needle: string): Promise<void> {
    const bytes = await fsp.readFile(file);
    const at = bytes.indexOf(Buffer.from(needle));
    expect(at).toBeGreaterThan(0);
    bytes[at]! ^= 1;
    await fsp.writeFile(file, bytes);
  }

  test('a bit flipped in an offset of a damaged open part (7493989779944505000, beyond 2^53) is set aside by recovery, never thrown at startup', async () => {
    const { file, bytes } = await samplePart(path.join(dir, 'sample'));
    const name = parsePartName(path.basename(file))!;
    const tableDir = path.join(dir, 'table');
    await fsp.mkdir(tableDir, { recursive: true });
    // The qualification's fuzz counterexample (seed 20261202): the flipped byte lies in the _offset values.
    await fsp.writeFile(
      path.join(tableDir, formatPartName(name, 'open')),
      damage(bytes, { kind: 'flip', at: 830718804, bit: 1, bytes: [0] }),
    );
    const report = await recoverTableStaging({
      tableDir,
      locks: new FileLocks(),
      owner: 'recovery',
      logger: silentLogger(),
    });
    expect(report.quarantined).toHaveLength(1);
  });

  /**
   * The first record batch message of `bytes` with every int64 equal to its row count in
   * its metadata (the batch's length and its columns' field nodes) raised by 2^32: the
   * buffers still hold 100 rows, the metadata claims 4,294,967,396.
   */
  function claimMoreRows(bytes: Uint8Array, rows: number): Uint8Array {
    const out = Buffer.from(bytes);
    let pos = 0;
    for (;;) {
      const metadataLength = out.readInt32LE(pos + 4);
      const start = pos + 8;
      const message = Message.decode(out.subarray(start, start + metadataLength));
      if (message.headerType === MessageHeader.RecordBatch) {
        let changed = 0;
        for (let at = start; at + 8 <= start + metadataLength; at += 8) {
          if (out.readBigInt64LE(at) === BigInt(rows)) {
            out[at + 4] = 1;
            changed += 1;
          }
        }
        expect(changed).toBeGreaterThan(1);
        return out;
      }
      pos = start + metadataLength + Number(message.bodyLength);
    }
  }

  test('a row count raised by a damaged length in an open part is refused, never looped over for billions of rows (recovery hung the test run)', async () => {
    const { file, bytes } = await samplePart(path.join(dir, 'sample'));
    const damaged = claimMoreRows(bytes, 100);
    // The reader must refuse it before any loop over its rows runs (a regression would hang here, not fail).
    expect(() => decodeBatches(damaged.subarray(0, scanStream(damaged).validLength))).toThrow(
      /claims|shorter than 4294967396 rows|rows in a batch of 4294967396/,
    );
    const name = parsePartName(path.basename(file))!;
    const tableDir = path.join(dir, 'table');
    await fsp.mkdir(tableDir, { recursive: true });
    await fsp.writeFile(path.join(tableDir, formatPartName(name, 'open')), damaged);
    const report = await recoverTableStaging({
      tableDir,
      locks: new FileLocks(),
      owner: 'recovery',
      logger: silentLogger(),
    });
    expect(report.quarantined).toHaveLength(1);
  });

  test('one bit flipped in a value buffer of a sealed part ("orders/0/200" → "nrders/0/200") is refused, not read as other rows', async () => {
    const { file } = await samplePart(dir);
    await flipIn(file, 'orders/0/200');
    await expect(readSealedPart(file)).rejects.toBeInstanceOf(PartCorruptError);
  });

  test('a sealed part with a flipped value byte is quarantined by the materializer and none of its rows is published', async () => {
    const tableDir = path.join(dir, 'staging', TABLE);
    const lanceDir = path.join(dir, 'lance');
    await stageRows(tableDir, { partitions: 1, perPartition: 300, rowsPerPart: 100 });
    const parts = (await fsp.readdir(tableDir)).filter((n) => n.endsWith('.arrows')).sort();
    expect(parts).toHaveLength(3);
    // The second part holds offsets 100..199: corrupt one of its payloads.
    await flipIn(path.join(tableDir, parts[1]!), payloadOf(TOPIC, 0, 150));
    const m = await openMaterializer(tableDir, lanceDir);
    m.setOwnership(ownershipOf(1, [{ owner: 'A', epoch: 1, start: 0 }], 300));
    await m.runOnce();
    await m.runOnce();
    const offsets = (await readLance(lanceDir)).map((r) => r.offset).sort((a, b) => a - b);
    expect(offsets).toEqual([...range(0, 100), ...range(200, 300)]);
    const quarantined = await fsp.readdir(path.join(tableDir, 'quarantine'));
    expect(quarantined).toContain(parts[1]);
    expect((await readLance(lanceDir)).every((r) => r.message === payloadOf(TOPIC, 0, r.offset))).toBe(true);
  });
});
