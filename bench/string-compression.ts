/**
 * What a table's string compression costs and saves: the same rows appended through
 * LanceDB's add (the replica's path: the IPC file to the native add, src/lance/arrow-add.ts)
 * into a table created with Lance's own choice (FSST) or with its string columns marked
 * `lance-encoding:compression` lz4 or zstd, on two kinds of text:
 *
 * - `logs`: the bench's log records (src/cli/log-records.ts: messages padded to ~800 B
 *   with a repeated filler), decoded to their string and number columns;
 * - `varied`: short messages of random words, random 32-digit trace ids, a level.
 *
 * Per choice, alternating `--rounds` times: this process's CPU for the adds (every thread:
 * LanceDB's encoding runs in its Rust threads), the data files' size, and the CPU of a full
 * scan and of 100 row lookups. Medians printed.
 *
 *   npm run build && node dist/bench/string-compression.js [--rows 500000] [--rounds 3]
 */
import { promises as fsp } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as lancedb from '@lancedb/lancedb';
import {
  DataType,
  Field,
  Float64,
  Int32,
  Schema,
  Table,
  Utf8,
  tableToIPC,
  vectorFromArray,
} from 'apache-arrow';
import { appendArrowTable, takesArrowAdd } from '../src/lance/arrow-add';
import { benchRecord } from './lib/records';
import { benchArgs } from './args';
import { SeededRandom } from '../test/support/seeded-random';

const args = benchArgs();
const rows = Number(args.get('rows') ?? '500000');
const rounds = Number(args.get('rounds') ?? '3');
/** `auto`: no mark, Lance's own choice (FSST); `lz4`, `zstd`: Lance's general compression. */
type StringCompression = 'auto' | 'lz4' | 'zstd';
const CHOICES: readonly StringCompression[] = ['auto', 'lz4', 'zstd'];

/** The schema with its string columns marked for `choice` in Lance's field metadata. */
function markedSchema(fields: readonly Field[], choice: StringCompression): Schema {
  return new Schema(
    fields.map((f) =>
      choice !== 'auto' && DataType.isUtf8(f.type)
        ? new Field(f.name, f.type, f.nullable, new Map([['lance-encoding:compression', choice]]))
        : new Field(f.name, f.type, f.nullable),
    ),
  );
}
const BATCH = 50_000;

const range = (n: number) => Array.from({ length: n }, (_, i) => i);
const median = (xs: readonly number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const cpuSeconds = (since: NodeJS.CpuUsage) => {
  const u = process.cpuUsage(since);
  return (u.user + u.system) / 1e6;
};

function logsTable(n: number): Table {
  const cols = {
    level: [] as string[],
    service: [] as string[],
    host: [] as string[],
    message: [] as string[],
  };
  const status: number[] = [];
  const latency: number[] = [];
  const trace: string[] = [];
  for (let i = 0; i < n; i++) {
    const r = JSON.parse(benchRecord(i, 1_700_000_000_000)) as Record<string, unknown>;
    cols.level.push(String(r.level));
    cols.service.push(String(r.service));
    cols.host.push(String(r.host));
    cols.message.push(String(r.message));
    status.push(Number(r.status));
    latency.push(Number(r.latency_ms));
    trace.push(String(r.trace_id));
  }
  return new Table({
    level: vectorFromArray(cols.level, new Utf8()),
    service: vectorFromArray(cols.service, new Utf8()),
    host: vectorFromArray(cols.host, new Utf8()),
    message: vectorFromArray(cols.message, new Utf8()),
    status: vectorFromArray(status, new Int32()),
    latency_ms: vectorFromArray(latency, new Float64()),
    trace_id: vectorFromArray(trace, new Utf8()),
    n: vectorFromArray(range(n), new Int32()),
  });
}

function variedTable(n: number): Table {
  const random = new SeededRandom(7);
  const words = ['alpha', 'beta', 'order', 'payment', 'failed', 'timeout', 'cache', 'miss', 'user', 'served'];
  const pick = <T>(xs: readonly T[]): T => random.pick(xs);
  const hex = () =>
    random
      .int(2 ** 32)
      .toString(16)
      .padStart(8, '0');
  const message: string[] = [];
  const trace: string[] = [];
  const level: string[] = [];
  for (let i = 0; i < n; i++) {
    message.push(`${Array.from({ length: 12 }, () => pick(words)).join(' ')} id=${i}`);
    trace.push(hex() + hex() + hex() + hex());
    level.push(pick(['INFO', 'WARN', 'ERROR', 'DEBUG']));
  }
  return new Table({
    message: vectorFromArray(message, new Utf8()),
    trace_id: vectorFromArray(trace, new Utf8()),
    level: vectorFromArray(level, new Utf8()),
    n: vectorFromArray(range(n), new Int32()),
  });
}

async function bytesUnder(directory: string): Promise<number> {
  let total = 0;
  for (const entry of await fsp.readdir(directory, { withFileTypes: true, recursive: true }))
    if (entry.isFile()) total += (await fsp.stat(path.join(entry.parentPath, entry.name))).size;
  return total;
}

interface Sample {
  writeCpu: number;
  mb: number;
  scanCpu: number;
  takeCpu: number;
}

async function once(
  dir: string,
  data: Table,
  ipc: readonly Uint8Array[],
  choice: StringCompression,
): Promise<Sample> {
  const uri = path.join(dir, `${choice}-${Date.now()}`);
  const db = await lancedb.connect(uri);
  const schema = markedSchema(data.schema.fields, choice);
  const table = await db.createEmptyTable('t', schema, { mode: 'create' });
  if (!(await takesArrowAdd(table))) throw new Error('this LanceDB takes no direct add');
  const start = process.cpuUsage();
  for (const bytes of ipc) await appendArrowTable(table, bytes, true);
  const writeCpu = cpuSeconds(start);
  const mb = (await bytesUnder(path.join(uri, 't.lance', 'data'))) / 1e6;
  const scan = process.cpuUsage();
  await table.query().toArrow();
  const scanCpu = cpuSeconds(scan);
  const take = process.cpuUsage();
  const step = Math.max(1, Math.floor(data.numRows / 100));
  for (let i = 0; i < 100; i++)
    await table
      .query()
      .where(`n = ${i * step}`)
      .toArray();
  const takeCpu = cpuSeconds(take);
  table.close();
  db.close();
  await fsp.rm(uri, { recursive: true, force: true });
  return { writeCpu, mb, scanCpu, takeCpu };
}

async function main(): Promise<void> {
  const dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'kl-string-compression-'));
  try {
    for (const [name, data] of [
      ['logs', logsTable(rows)],
      ['varied', variedTable(rows)],
    ] as const) {
      const ipc: Uint8Array[] = [];
      for (let from = 0; from < data.numRows; from += BATCH)
        ipc.push(tableToIPC(data.slice(from, from + BATCH), 'file'));
      const samples = new Map<StringCompression, Sample[]>(CHOICES.map((c) => [c, []]));
      for (let r = 0; r < rounds; r++)
        for (const choice of CHOICES) samples.get(choice)!.push(await once(dir, data, ipc, choice));
      const arrowMb = ipc.reduce((s, b) => s + b.byteLength, 0) / 1e6;
      console.log(
        `\n${name}: ${data.numRows.toLocaleString()} rows, ${arrowMb.toFixed(0)} MB of Arrow, ${rounds} rounds (medians)`,
      );
      console.log(
        '| choice | add CPU s | data files MB | full scan CPU s | 100 reads of one row (n = …, no index) CPU s |',
      );
      console.log('| --- | --- | --- | --- | --- |');
      for (const choice of CHOICES) {
        const s = samples.get(choice)!;
        console.log(
          `| ${choice} | ${median(s.map((x) => x.writeCpu)).toFixed(2)} | ${median(s.map((x) => x.mb)).toFixed(0)} | ${median(
            s.map((x) => x.scanCpu),
          ).toFixed(2)} | ${median(s.map((x) => x.takeCpu)).toFixed(2)} |`,
        );
      }
    }
  } finally {
    await fsp.rm(dir, { recursive: true, force: true });
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
