import { execFile } from 'node:child_process';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { SchemaRegistry, SchemaType } from '@kafkajs/confluent-schema-registry';
import { Campaign, TABLE, type Slot } from '../support/campaign';
import { finalCheck } from '../support/final-check';
import { settle } from '../support/settle';
import { VENV } from '../support/independent-reader';
import { openPublications } from '../support/ledger-state';
import type { ChecksummedRecord, Production } from '../support/producer';
import { sleep } from '../support/random';
import { campaignDetails } from '../support/report-lines';
import type { QualifyContext, QualifyStep, QualifyStepReport } from '../step';

const MiB = 1024 * 1024;
const SESSION_TIMEOUT_MS = 8_000;
/** The field version 2 of the writer schema adds. */
const ADDED = 'shard';

/** The campaign's records `{n, payload, sha}` as Avro: the same columns the JSON steps declare. */
const RECORD_V1 = {
  type: 'record',
  name: 'Checksummed',
  namespace: 'kafka_lance.qualify',
  fields: [
    { name: 'n', type: 'long' },
    { name: 'payload', type: 'string' },
    { name: 'sha', type: 'string' },
  ],
};
/** Version 2: an optional field added, compatible under the registry's BACKWARD rule. */
const RECORD_V2 = {
  ...RECORD_V1,
  fields: [...RECORD_V1.fields, { name: ADDED, type: ['null', 'string'], default: null }],
};

/**
 * Avro records through a real registry while the writer schema changes: two replicas
 * consume checksummed records (Confluent's serializer, @kafkajs/confluent-schema-registry);
 * half-way through the bytes, version 2 (a field added) is registered and produced from
 * then on, and replicas are SIGKILLed shortly before the change, right after it (the first
 * records of the new version being staged) and into the first publication that carries
 * the new column, each restarted from its data dir. Then the final check of support/final-check.ts
 * (every offset a row or a dead letter, unique rows, checksums, committed = log end,
 * pylance agrees) and the new column: in the table's schema, read by pylance, holding a
 * value in exactly the rows of version-2 records.
 */
export const step: QualifyStep = {
  name: 'schema-registry',
  title: 'Registry formats: Avro with a schema change under SIGKILLs',
  needs: ['schema-registry'],
  run: (ctx: QualifyContext) => runSchemaRegistryStep(ctx),
};

async function runSchemaRegistryStep(ctx: QualifyContext): Promise<QualifyStepReport> {
  const url = ctx.schemaRegistry?.url;
  if (!url) throw new Error('schema-registry: the runner provided no Schema Registry');
  const totalBytes = ctx.short ? 6 * MiB : 48 * MiB;
  const c = new Campaign({
    context: ctx,
    name: 'avro',
    partitions: 6,
    replicas: 2,
    sessionTimeoutMs: SESSION_TIMEOUT_MS,
    production: {
      totalBytes,
      payloadChars: 4_000,
      bytesPerSecond: ctx.short ? 0.15 * MiB : 1 * MiB,
      badEvery: 997,
    },
    definition: { format: 'avro', schema: 'infer', schemaRegistry: { url } },
  });
  const registry = new SchemaRegistry({ host: url });
  const subject = { subject: `${c.topic}-value` };
  const v1 = (await registry.register({ type: SchemaType.AVRO, schema: JSON.stringify(RECORD_V1) }, subject))
    .id;
  // The producer changes the writer schema itself, half-way through the bytes, so that the
  // change falls inside production whatever the kills before it cost.
  let production: Production | undefined;
  let change: Promise<number> | undefined;
  const writer = { id: v1, v2Records: 0, changedAt: 0, changedAfter: 0 };
  let changed!: () => void;
  const changeDone = new Promise<void>((resolve) => (changed = resolve));
  const encode = async (record: ChecksummedRecord) => {
    if (change === undefined && production !== undefined && production.bytes() >= totalBytes / 2) {
      writer.changedAt = c.at();
      writer.changedAfter = production.acked();
      change = registry
        .register({ type: SchemaType.AVRO, schema: JSON.stringify(RECORD_V2) }, subject)
        .then(({ id }) => id);
    }
    if (change === undefined) return registry.encode(writer.id, record);
    if (writer.id === v1) {
      writer.id = await change;
      c.log(`schema change: version 2 (registry id ${writer.id}, adds "${ADDED}") from now on`);
      changed();
    }
    writer.v2Records += 1;
    return registry.encode(writer.id, { ...record, [ADDED]: `s${record.n % 7}` });
  };
  const changeLines: string[] = [];
  try {
    await c.setUp();
    production = c.startProduction({ encode });
    // Before the change: into a publication of version-1 rows if one opens soon.
    await untilBytes(production.bytes, totalBytes * 0.3);
    await killAndRestart(
      c,
      (await publishingSlot(c.slots, 3_000)) ?? c.random.pick(c.slots),
      'shortly before the change',
    );
    // Right after it: the first version-2 records are being decoded and staged.
    await Promise.race([changeDone, production.done]);
    if (writer.id === v1) throw new Error('production ended before the schema change');
    changeLines.push(
      `- Schema change at ${writer.changedAt} s: version 1 (registry id ${v1}) → version 2 (registry id ${writer.id}, adds the optional field \`${ADDED}\`), after ${writer.changedAfter} records.`,
    );
    await sleep(c.random.int(200, 1_500));
    await killAndRestart(c, c.random.pick(c.slots), 'staging of the first version-2 records');
    // Into the first publications that carry the new column.
    await killAndRestart(
      c,
      (await publishingSlot(c.slots, 20_000)) ?? c.random.pick(c.slots),
      'publication (the new column)',
    );
    for (let i = 0; !ctx.short && i < 5; i++) {
      await sleep(c.random.int(1_000, 5_000));
      await killAndRestart(c, c.random.pick(c.slots), 'random moment');
    }
    await production.done;
    c.log(
      `production done: ${(production.bytes() / MiB).toFixed(1)} MiB, ${production.acked()} records; settling`,
    );
    const settled = await settle(c, ctx.short ? 120_000 : 300_000);
    await c.stopAll();
    const check = await finalCheck(c, settled.stalled);
    const column = await addedColumn(c);
    const problems = [...check.problems];
    // A send retried after a failure may be in the log twice: then at least, else exactly.
    const exact = production.retries() === 0;
    if (!column.inSchema) problems.push(`the table has no column ${ADDED}`);
    if (column.withValue === undefined) problems.push(`pylance could not read the column ${ADDED}`);
    else if (exact ? column.withValue !== writer.v2Records : column.withValue < writer.v2Records)
      problems.push(
        `${column.withValue} rows hold ${ADDED}, ${writer.v2Records} version-2 records were produced`,
      );
    changeLines.push(
      `- The new column: ${column.inSchema ? `\`${ADDED}\` (${column.type}) in the table's schema` : 'NOT in the table'}; ` +
        `pylance reads a value in ${column.withValue ?? '?'} rows = ${writer.v2Records} version-2 records produced.`,
    );
    const passed = problems.length === 0 && c.kills.length >= 3;
    return {
      passed,
      summary:
        `${(production.bytes() / MiB).toFixed(1)} MiB of Avro in ${check.logRecords} records on 6 partitions, 2 replicas, a writer schema change (a field added) at ${writer.changedAt} s, ` +
        `${c.kills.length} SIGKILLs around it each followed by a restart from the replica's data dir. ` +
        `${check.rows} rows = ${check.logRecords} − ${check.deadLetters} dead letters` +
        ` (pylance: ${check.independent?.rows ?? '?'} rows, ${check.independent?.duplicates ?? '?'} duplicates, ${check.independent?.checksumMismatches ?? '?'} checksum mismatches); ` +
        `column ${ADDED} holds a value in ${column.withValue ?? '?'} rows = ${writer.v2Records} version-2 records. ` +
        (passed ? 'Passed.' : `FAILED: ${problems.join('; ')}`) +
        ` ${c.at().toFixed(0)} s.`,
      details: [...changeLines, ...campaignDetails(c, check, [])],
    };
  } finally {
    await c.close();
  }
}

async function untilBytes(bytes: () => number, at: number): Promise<void> {
  while (bytes() < at) await sleep(200);
}

/** SIGKILLs the slot's replica and restarts it from its data dir once it is gone. */
async function killAndRestart(c: Campaign, slot: Slot, aim: string): Promise<void> {
  await c.kill(slot, aim);
  await sleep(c.random.int(300, 2_000));
  const run = c.restart(slot);
  await run.seen('kafka.join', 60_000);
}

/** The first slot whose ledger holds a planned or `writing` publication (polled every 10 ms), or none in time. */
async function publishingSlot(slots: readonly Slot[], timeoutMs: number): Promise<Slot | undefined> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    for (const slot of slots) {
      if (!slot.run.alive) continue;
      const open = openPublications(slot.dataDir, TABLE);
      if (open.writing.length > 0 || open.planned.length > 0) return slot;
    }
    await sleep(10);
  }
  return undefined;
}

/** The added column as pylance sees it: in the schema, and in how many rows it holds a value. */
async function addedColumn(
  c: Campaign,
): Promise<{ inSchema: boolean; type: string | undefined; withValue: number | undefined }> {
  const script = [
    'import json, sys, lance',
    'ds = lance.dataset(sys.argv[1])',
    'f = ds.schema.field(sys.argv[2]) if sys.argv[2] in ds.schema.names else None',
    'n = ds.count_rows(filter=f"{sys.argv[2]} IS NOT NULL") if f is not None else 0',
    'print(json.dumps({"type": str(f.type) if f is not None else None, "withValue": n}))',
  ].join('\n');
  try {
    const { stdout } = await promisify(execFile)(path.join(VENV, 'bin/python'), [
      '-c',
      script,
      path.join(c.lanceUri, `${TABLE}.lance`),
      ADDED,
    ]);
    const read = JSON.parse(stdout) as { type: string | null; withValue: number };
    return { inSchema: read.type !== null, type: read.type ?? undefined, withValue: read.withValue };
  } catch (error) {
    c.notes.push(`pylance on the column ${ADDED}: ${String(error)}`);
    return { inSchema: false, type: undefined, withValue: undefined };
  }
}
