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
import { END_OF_STREAM, decodeBatches, scanStream } from '../../src/staging/ipc-stream';

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

  /** A start's recovery of the test's table directory. */
  function recoverTable() {
    return recoverTableStaging({
      tableDir: path.join(dir, 'table'),
      locks: new FileLocks(),
      owner: 'recovery',
      logger: silentLogger(),
    });
  }

  /** Recovery of `bytes` written as the open part of `file`'s name, with its report and what is left. */
  async function recoverAsOpen(file: string, bytes: Uint8Array) {
    const name = parsePartName(path.basename(file))!;
    const tableDir = path.join(dir, 'table');
    await fsp.mkdir(tableDir, { recursive: true });
    await fsp.writeFile(path.join(tableDir, formatPartName(name, 'open')), bytes);
    const report = await recoverTable();
    return { report, quarantine: await fsp.readdir(path.join(tableDir, 'quarantine')).catch(() => []) };
  }

  test('a bit flipped in an offset of a damaged open part (7493989779944505000, beyond 2^53) is set aside by recovery, never thrown at startup', async () => {
    const { file, bytes } = await samplePart(path.join(dir, 'sample'));
    // The qualification's fuzz counterexample (seed 20261202): the flipped byte lies in the _offset values.
    const damaged = damage(bytes, { kind: 'flip', at: 830718804, bit: 1, bytes: [0] });
    const { report } = await recoverAsOpen(file, damaged);
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
    const { report } = await recoverAsOpen(file, damaged);
    expect(report.quarantined).toHaveLength(1);
  });

  test("a schema's field count raised to 2^28 by one flipped bit (seed 93383: byte 471, bit 4) is refused before apache-arrow decodes it, never built field by field until the heap runs out", async () => {
    const { file, bytes } = await samplePart(path.join(dir, 'sample'));
    const damaged = damage(bytes, { kind: 'flip', at: 920568255, bit: 4, bytes: [0] });
    const scan = scanStream(damaged);
    expect(scan.hasSchema).toBe(false);
    expect(scan.damage?.offset).toBe(0);
    expect(scan.damage?.reason).toMatch(/vector of 268435456 elements/);
    // Before the check, this read ran the runner out of a 4 GB heap (a regression crashes here).
    const whole = await recoverAsOpen(file, damaged);
    expect(whole.report.quarantined).toHaveLength(1);
  });

  test('an open part still being written (no end-of-stream, no checksum) whose schema message is damaged is quarantined, not removed as empty with the durable batches after it', async () => {
    const { file, bytes } = await samplePart(path.join(dir, 'sample'));
    const unsealed = bytes.subarray(0, scanStream(bytes).validLength - END_OF_STREAM.byteLength);
    const damaged = damage(unsealed, { kind: 'flip', at: 471, bit: 4, bytes: [0] });
    expect(scanStream(damaged).damage?.offset).toBe(0);
    const { report, quarantine } = await recoverAsOpen(file, damaged);
    expect(report.removedEmpty).toBe(0);
    expect(report.quarantined).toHaveLength(1);
    // Kept as it was for whoever repairs it: every byte of the three batches is still there.
    const kept = quarantine.filter((n) => n.endsWith('.arrows.part'));
    expect(kept).toHaveLength(1);
    const keptBytes = await fsp.readFile(path.join(dir, 'table', 'quarantine', kept[0]!));
    expect(keptBytes.equals(Buffer.from(damaged))).toBe(true);
  });

  /** Where each message of a stream starts. */
  function messageStarts(bytes: Uint8Array): number[] {
    const view = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    const starts: number[] = [];
    for (let pos = 0; pos + 8 <= view.byteLength && view.readInt32LE(pos + 4) !== 0;) {
      starts.push(pos);
      const length = view.readInt32LE(pos + 4);
      pos += 8 + length + Number(Message.decode(view.subarray(pos + 8, pos + 8 + length)).bodyLength);
    }
    return starts;
  }

  /** The sample part as a live writer leaves it: no end-of-stream, no trailer. */
  async function unsealedSample() {
    const { file, bytes } = await samplePart(path.join(dir, 'sample'));
    const unsealed = Buffer.from(bytes.subarray(0, scanStream(bytes).validLength - END_OF_STREAM.byteLength));
    return { file, bytes, unsealed, starts: messageStarts(unsealed) };
  }

  test.each([
    ['first', 1, 0],
    ['second', 2, 100],
    ['third', 3, 200],
  ])(
    'an open part whose %s record batch has damaged metadata: the whole batches before it are sealed, and the part itself is quarantined as it was (never removed as empty, never only cut short)',
    async (_which, message, keptRows) => {
      const { file, unsealed, starts } = await unsealedSample();
      const at = starts[message]!;
      // The root offset of its flatbuffer now points far past the message.
      unsealed.writeUInt32LE(0xffffff00, at + 8);
      expect(scanStream(unsealed).damage?.offset).toBe(at);
      const { report, quarantine } = await recoverAsOpen(file, unsealed);
      expect(report.removedEmpty).toBe(0);
      expect(report.sealedParts.map((p) => p.rows)).toEqual(keptRows === 0 ? [] : [keptRows]);
      const kept = quarantine.filter((n) => n.endsWith('.arrows.part'));
      expect(kept).toHaveLength(1);
      const keptBytes = await fsp.readFile(path.join(dir, 'table', 'quarantine', kept[0]!));
      expect(keptBytes.equals(unsealed)).toBe(true);
    },
  );

  test('a block of zeros inside a batch message with written blocks after it (a crash between page writes) keeps the batches before it, sealed', async () => {
    const { file, unsealed, starts } = await unsealedSample();
    // Zeros over the start of the third batch's metadata; the rest of it and its body stay.
    const third = starts[3]!;
    unsealed.fill(0, third + 8, third + 8 + 64);
    expect(scanStream(unsealed).damage?.offset).toBe(third);
    const { report, quarantine } = await recoverAsOpen(file, unsealed);
    expect(report.sealedParts.map((p) => p.rows)).toEqual([200]);
    // The original is kept for a human: zeros cannot tell an unwritten block from rot.
    expect(quarantine.filter((n) => n.endsWith('.arrows.part'))).toHaveLength(1);
  });

  test('damage in a part whose last write held its trailer (a crash during that write’s fsync can leave a block of it unwritten) seals the whole batches before it and quarantines the part', async () => {
    const { file, bytes } = await samplePart(path.join(dir, 'sample'));
    const whole = Buffer.from(bytes);
    whole.writeUInt32LE(0xffffff00, messageStarts(whole)[2]! + 8);
    const { report, quarantine } = await recoverAsOpen(file, whole);
    expect(report.sealedParts.map((p) => p.rows)).toEqual([100]);
    expect(quarantine.filter((n) => n.endsWith('.arrows.part'))).toHaveLength(1);
  });

  test('a recovery killed after it quarantined a damaged part and before it sealed the rewrite of its whole batches seals that rewrite at the next start, and keeps the original', async () => {
    const { file, unsealed, starts } = await unsealedSample();
    unsealed.writeUInt32LE(0xffffff00, starts[3]! + 8);
    // What the killed recovery left: its rewrite, whole but not yet renamed, and the original in quarantine.
    const first = await recoverAsOpen(file, unsealed);
    const tableDir = path.join(dir, 'table');
    const rewrite = first.report.sealedParts[0]!.path;
    await fsp.rename(rewrite, rewrite.replace(/\.arrows$/, '.arrows.part'));
    const again = await recoverTable();
    expect(again.sealedParts.map((p) => [path.basename(p.path), p.rows])).toEqual([
      [path.basename(rewrite), 200],
    ]);
    expect(again.quarantined).toEqual([]);
    const kept = (await fsp.readdir(path.join(tableDir, 'quarantine'))).filter((n) =>
      n.endsWith('.arrows.part'),
    );
    expect(kept).toHaveLength(1);
  });

  test('a damaged original found beside its sealed rewrite (put back from quarantine by hand) is quarantined again, never deleted as a leftover', async () => {
    const { file, unsealed, starts } = await unsealedSample();
    unsealed.writeUInt32LE(0xffffff00, starts[3]! + 8);
    const first = await recoverAsOpen(file, unsealed);
    const tableDir = path.join(dir, 'table');
    const [kept] = first.quarantine.filter((n) => n.endsWith('.arrows.part'));
    await fsp.rename(path.join(tableDir, 'quarantine', kept!), path.join(tableDir, kept!));
    const again = await recoverTable();
    expect(again.removedLeftovers).toBe(0);
    expect(again.quarantined).toHaveLength(1);
    expect(again.sealedParts.map((p) => p.rows)).toEqual([200]);
  });

  test('a tail of zeros where a batch message should be (blocks a crash never wrote) is a torn tail: the batches before it are kept', async () => {
    const { file, unsealed, starts } = await unsealedSample();
    unsealed.fill(0, starts[3]! + 8);
    const { report, quarantine } = await recoverAsOpen(file, unsealed);
    expect(quarantine).toEqual([]);
    expect(report.tornParts).toBe(1);
    expect(report.sealedParts.map((p) => p.rows)).toEqual([200]);
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
