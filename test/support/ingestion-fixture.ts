import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { Partitioners, type Admin, type Kafka } from 'kafkajs';
import { decodeChain } from '../../src/ownership/chain';
import { publishableRange } from '../../src/ownership/publishable-range';
import { readSealedPart } from '../../src/staging/sealed-part';
import { parsePartName } from '../../src/staging/part-name';

/** A produced record: where it landed and what it said. */
export interface Produced {
  readonly partition: number;
  readonly offset: number;
  readonly value: string;
}

export function logValue(n: number): string {
  return JSON.stringify({
    n,
    level: ['info', 'warn', 'error'][n % 3],
    service: `svc-${n % 13}`,
    message: `request ${n} handled in ${(n * 7) % 1000} ms ${'·'.repeat(n % 50)} ✓`,
  });
}

/**
 * Produces `count` records round-robin over the topic's partitions (acks=-1) and
 * returns each one's partition and offset, from the broker's answers.
 */
export async function produceRecords(
  kafka: Kafka,
  topic: string,
  partitions: number,
  count: number,
  valueOf: (n: number) => string | Buffer | null = logValue,
  firstN = 0,
): Promise<Produced[]> {
  const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner });
  await producer.connect();
  const produced: Produced[] = [];
  const chunk = 2_000;
  try {
    for (let start = firstN; start < firstN + count; start += chunk * partitions) {
      await Promise.all(
        Array.from({ length: partitions }, async (_, partition) => {
          const ns: number[] = [];
          for (
            let n = start + partition;
            n < Math.min(firstN + count, start + chunk * partitions);
            n += partitions
          )
            ns.push(n);
          if (ns.length === 0) return;
          const values = ns.map(valueOf);
          const [meta] = await producer.send({
            topic,
            acks: -1,
            messages: values.map((value) => ({ partition, value })),
          });
          const base = Number(meta!.baseOffset);
          values.forEach((v, i) =>
            produced.push({ partition, offset: base + i, value: v === null ? 'null' : String(v) }),
          );
        }),
      );
    }
  } finally {
    await producer.disconnect();
  }
  return produced;
}

export interface StagedRecord {
  readonly partition: number;
  readonly offset: number;
  readonly n: bigint | null;
  readonly message: string | null;
  readonly owner: string;
  readonly epoch: number;
  readonly dataDir: string;
}

/** Every row of every sealed part of `table` in each data directory. */
export async function readStaged(dataDirs: readonly string[], table: string): Promise<StagedRecord[]> {
  const rows: StagedRecord[] = [];
  for (const dataDir of dataDirs) {
    const dir = path.join(dataDir, 'staging', table);
    for (const name of await fsp.readdir(dir).catch(() => [] as string[])) {
      if (parsePartName(name)?.state !== 'sealed') continue;
      const { part, batches } = await readSealedPart(path.join(dir, name));
      for (const b of batches) {
        const partitions = b.getChild('_partition')!;
        const offsets = b.getChild('_offset')!;
        const ns = b.getChild('n');
        const messages = b.getChild('message');
        for (let i = 0; i < b.numRows; i++) {
          rows.push({
            partition: partitions.get(i) as number,
            offset: Number(offsets.get(i) as bigint),
            n: (ns?.get(i) as bigint | null) ?? null,
            message: (messages?.get(i) as string | null) ?? null,
            owner: part.epoch.owner,
            epoch: part.epoch.epoch,
            dataDir,
          });
        }
      }
    }
  }
  return rows;
}

/**
 * The rows the ceiling rule lets each replica publish: a row of an ownership epoch
 * counts when it lies in [start, ceiling) of that epoch, read from the ownership
 * chain in the group's committed offset metadata (DESIGN.md, "Ceiling rule").
 */
export async function publishable(
  admin: Admin,
  groupId: string,
  topic: string,
  rows: readonly StagedRecord[],
) {
  const [committed] = await admin.fetchOffsets({ groupId, topics: [topic] });
  const chains = new Map(
    committed!.partitions.map((p) => [
      p.partition,
      { chain: decodeChain(p.metadata), committed: Number(p.offset) },
    ]),
  );
  const kept: StagedRecord[] = [];
  const unknown: StagedRecord[] = [];
  for (const r of rows) {
    const c = chains.get(r.partition);
    const lookup = c
      ? publishableRange(c.chain, r.owner, r.epoch, c.committed)
      : { kind: 'unknown' as const };
    if (lookup.kind === 'unknown') unknown.push(r);
    else if (lookup.kind === 'superseded') {
      if (r.offset < lookup.below) kept.push(r);
    } else if (r.offset >= lookup.start && r.offset < lookup.ceiling) kept.push(r);
  }
  return { kept, unknown, chains };
}

/** Waits until the group's committed offsets reach the log end of every partition. */
export async function waitForCommittedAtEnd(
  admin: Admin,
  groupId: string,
  topic: string,
  timeoutMs = 120_000,
) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const ends = await admin.fetchTopicOffsets(topic);
    const [committed] = await admin.fetchOffsets({ groupId, topics: [topic] });
    const at = new Map(committed!.partitions.map((p) => [p.partition, p.offset]));
    if (ends.every((e) => at.get(e.partition) === e.high)) return;
    if (Date.now() > deadline) {
      throw new Error(
        `committed ${JSON.stringify([...at])} never reached ${JSON.stringify(ends.map((e) => e.high))}`,
      );
    }
    await new Promise((r) => setTimeout(r, 250));
  }
}

export async function writeConsumer(dir: string, definition: Record<string, unknown>): Promise<string> {
  const file = path.join(dir, `${String(definition.name)}.json`);
  await fsp.writeFile(file, JSON.stringify(definition, null, 2));
  return file;
}

/** Asserts the publishable rows are exactly the produced records: each once, with its bytes. */
export function expectExactlyProduced(rows: readonly StagedRecord[], produced: readonly Produced[]): void {
  const expected = new Map(produced.map((p) => [`${p.partition}:${p.offset}`, p]));
  const seen = new Set<string>();
  for (const r of rows) {
    const key = `${r.partition}:${r.offset}`;
    if (seen.has(key)) throw new Error(`record ${key} is publishable twice`);
    seen.add(key);
    const p = expected.get(key);
    if (!p) throw new Error(`record ${key} was never produced`);
    const value = JSON.parse(p.value) as { n: number; message: string };
    if (r.n !== BigInt(value.n) || r.message !== value.message) {
      throw new Error(`record ${key} differs: staged n=${r.n} ${r.message}, produced ${p.value}`);
    }
  }
  const missing = produced.filter((p) => !seen.has(`${p.partition}:${p.offset}`));
  if (missing.length > 0) {
    throw new Error(
      `${missing.length} produced records are not publishable, e.g. ${JSON.stringify(missing.slice(0, 3))}`,
    );
  }
}
