import * as path from 'node:path';
import * as lancedb from '@lancedb/lancedb';
import { Campaign, TABLE, type Slot } from '../support/campaign';
import { openPublications } from '../support/ledger-state';
import { readUpsertTable } from '../support/independent-reader';
import { sleep } from '../support/random';
import type { QualifyContext, QualifyStep, QualifyStepReport } from '../step';

const SESSION_TIMEOUT_MS = 10_000;
/** 12.8 kB of repeated hex: out of line (TOASTed) by STORAGE EXTERNAL, which compressed it would not be. */
const BIG = 'repeat(md5(random()::text), 400)';

interface SourceRow {
  readonly id: number;
  readonly name: string;
  readonly note: string | null;
}

/**
 * Change data capture from a real PostgreSQL through a real Debezium (deploy/debezium-local:
 * Debian's PostgreSQL with wal_level=logical, Kafka Connect standalone with Debezium's
 * PostgreSQL connector 3.6.1.Final, JsonConverter with schemas.enable) into an upsert table
 * (`mode: 'upsert'`, `key: { fields: ['id'] }`, `envelope: 'debezium'`), two replicas. A
 * snapshot, then rounds of transactions (updates, some leaving a TOASTed note alone; deletes;
 * inserts; primary-key updates, which Debezium sends as a delete and a create), while the
 * replicas are SIGKILLed (into a merge when one is under way, else at a random moment) and
 * restarted from their data dirs, and one is
 * SIGSTOPped past the session timeout and SIGCONTed (a zombie). The verdict: once quiet, the
 * Lance table read by pylance (`_deleted = false`) equals `SELECT * FROM t ORDER BY id`, row
 * for row, with no key held twice, and nothing was dead-lettered.
 */
export const step: QualifyStep = {
  name: 'cdc',
  title: 'Change data capture: PostgreSQL → Debezium → an upsert table, with kills and a zombie',
  needs: ['debezium'],
  async run(ctx: QualifyContext): Promise<QualifyStepReport> {
    const debezium = ctx.debezium;
    if (!debezium) throw new Error('the cdc step needs deploy/debezium-local (context.debezium)');
    const rounds = ctx.short ? 12 : 40;
    const kills = ctx.short ? 2 : 5;
    const c = new Campaign({
      context: ctx,
      name: 'cdc',
      partitions: 3,
      replicas: 2,
      sessionTimeoutMs: SESSION_TIMEOUT_MS,
      definition: {
        schema: { fields: { id: 'int64', name: 'string', note: 'string' } },
        mode: 'upsert',
        key: { fields: ['id'] },
        envelope: 'debezium',
        errors: { tolerance: 'none' },
      },
    });
    const name = `cdc_${ctx.seed}_${Date.now().toString(36)}`;
    const connector = `qualify_${name}`;
    const source = async (): Promise<SourceRow[]> =>
      JSON.parse(
        (await debezium.psql(`SELECT coalesce(json_agg(t ORDER BY id), '[]') FROM ${name} t`)).trim(),
      ) as SourceRow[];
    const zombie: string[] = [];
    try {
      await c.createTopic();
      await debezium.psql(
        `CREATE TABLE ${name} (id int PRIMARY KEY, name text NOT NULL, note text);
         ALTER TABLE ${name} REPLICA IDENTITY FULL;
         ALTER TABLE ${name} ALTER COLUMN note SET STORAGE EXTERNAL;
         INSERT INTO ${name} SELECT g, 'snap ' || g, CASE WHEN g % 5 = 0 THEN ${BIG} WHEN g % 3 = 0 THEN NULL ELSE 'n' || g END
           FROM generate_series(1, 1000) g;`,
      );
      await debezium.connector(connector, {
        'connector.class': 'io.debezium.connector.postgresql.PostgresConnector',
        'database.hostname': '127.0.0.1',
        'database.port': String(debezium.port),
        'database.user': 'postgres',
        'database.password': '',
        'database.dbname': 'postgres',
        'topic.prefix': connector,
        'table.include.list': `public.${name}`,
        'plugin.name': 'pgoutput',
        'slot.name': connector,
        'publication.name': connector,
        'publication.autocreate.mode': 'filtered',
        // Into the campaign's topic (3 partitions, made above): Debezium keys it by id.
        transforms: 'route',
        'transforms.route.type': 'org.apache.kafka.connect.transforms.RegexRouter',
        'transforms.route.regex': '.*',
        'transforms.route.replacement': c.topic,
      });
      c.log(`table ${name} (1,000 rows) and connector ${connector} into ${c.topic}`);
      await c.startReplicas();
      const killAt = new Set(Array.from({ length: kills }, () => c.random.int(1, rounds - 2)));
      const zombieAt = Math.floor(rounds / 2);
      let statements = 0;
      for (let round = 0; round < rounds; round++) {
        await debezium.psql(
          `BEGIN;
           UPDATE ${name} SET name = 'upd ' || id || '/${round}' WHERE id % 7 = ${round % 7};
           UPDATE ${name} SET note = 'note ' || id || '/${round}' WHERE id % 11 = ${round % 11} AND id % 5 <> 0;
           DELETE FROM ${name} WHERE id % 13 = ${round % 13} AND id < 1000;
           INSERT INTO ${name} SELECT g, 'new ' || g, CASE WHEN g % 2 = 0 THEN ${BIG} END
             FROM generate_series(${10_000 + round * 50}, ${10_000 + round * 50 + 29}) g;
           UPDATE ${name} SET id = id + 1000000 WHERE id IN (SELECT id FROM ${name} WHERE id < 1000000 AND id % 17 = ${round % 17} LIMIT 3);
           COMMIT;`,
        );
        statements += 6;
        if (killAt.has(round)) {
          // Into a merge when one shows within 5 s (its ledger `writing`), else at a random moment.
          const writing = await writingSlot(c, 5_000);
          const slot = writing ?? c.random.pick(c.slots.filter((s) => s.run.alive));
          if (!writing) await sleep(c.random.int(0, 1_500));
          await c.kill(
            slot,
            `round ${round} of ${rounds}: ${writing ? 'a publication writing' : 'a random moment'}`,
          );
          await sleep(c.random.int(300, 2_000));
          c.restart(slot);
        }
        if (round === zombieAt) {
          const slot = c.random.pick(c.slots.filter((s) => s.run.alive));
          const pauseMs = SESSION_TIMEOUT_MS + 6_000;
          c.log(`zombie: SIGSTOP ${slot.label} (pid ${slot.run.pid}) for ${pauseMs / 1000} s`);
          const stoppedAt = c.at();
          slot.run.signal('SIGSTOP');
          await sleep(pauseMs);
          slot.run.signal('SIGCONT');
          const rejoined = await slot.run.next((e) => e.event === 'kafka.join', 60_000);
          zombie.push(
            `- Zombie: ${slot.label} (pid ${slot.run.pid}) SIGSTOPped at ${stoppedAt} s for ${pauseMs / 1000} s (session timeout ${SESSION_TIMEOUT_MS / 1000} s), SIGCONTed; ${rejoined ? 'it rejoined the group' : 'no rejoin logged within 60 s'}`,
          );
        }
        await sleep(c.random.int(50, 400));
      }
      await c.restartStopped();
      const expected = await source();
      const dataset = path.join(c.lanceUri, `${TABLE}.lance`);
      // Quiet: LanceDB's reading of the live rows equals PostgreSQL's table.
      const deadline = Date.now() + (ctx.short ? 180_000 : 400_000);
      const want = JSON.stringify(expected);
      let seen = '';
      for (;;) {
        seen = JSON.stringify(await liveRows(c.lanceUri));
        if (seen === want || Date.now() > deadline) break;
        await sleep(1_000);
      }
      const quietAt = c.at();
      await c.stopAll();
      const reading = await readUpsertTable(dataset, 'id', ['id', 'name', 'note']);
      const read: SourceRow[] = reading.rows.map((r) => ({
        id: Number(r.id),
        name: typeof r.name === 'string' ? r.name : JSON.stringify(r.name),
        note: typeof r.note === 'string' ? r.note : r.note === null ? null : JSON.stringify(r.note),
      }));
      const problems: string[] = [...c.notes];
      const first = firstDifference(read, expected);
      if (first) problems.push(`pylance's table differs from PostgreSQL's: ${first}`);
      if (reading.duplicated.length > 0)
        problems.push(`keys held by more than one live row: ${reading.duplicated.slice(0, 10).join(', ')}`);
      const errors = c.errorEvents();
      if (errors.length > 0) problems.push(`${errors.length} error events, first: ${errors[0]}`);
      await debezium.deleteConnector(connector);
      await debezium
        .psql(`SELECT pg_drop_replication_slot('${connector}'); DROP PUBLICATION ${connector};`)
        .catch(() => '');
      const passed = problems.length === 0;
      const toasted = expected.filter((r) => (r.note?.length ?? 0) > 10_000).length;
      return {
        passed,
        summary:
          `PostgreSQL table ${name}: a 1,000-row snapshot, then ${rounds} transactions of ${statements / rounds} statements (updates, deletes, inserts, primary-key updates; ${toasted} rows with a TOASTed note at the end) through Debezium 3.6.1.Final into ${c.topic}; 2 replicas, ${c.kills.length} SIGKILLs (each restarted from its data dir) and one zombie. ` +
          `Quiet ${quietAt} s into the run; pylance read ${read.length} live rows (${reading.all_rows} rows with the deletes kept) against PostgreSQL's ${expected.length}. ` +
          (passed ? 'Equal row for row. Passed.' : `FAILED: ${problems.join('; ')}`),
        details: [
          `- Topic \`${c.topic}\`, group \`${c.groupId}\`, table \`${dataset}\` (3 partitions, 2 replicas, session timeout ${SESSION_TIMEOUT_MS} ms), definition: mode upsert, key { fields: [id] }, envelope debezium, errors.tolerance none`,
          `- Source: \`CREATE TABLE ${name} (id int PRIMARY KEY, name text NOT NULL, note text)\`, REPLICA IDENTITY FULL; connector ${connector} (pgoutput, RegexRouter into the campaign topic, JsonConverter schemas.enable=true)`,
          ...zombie,
          ...c.kills.map(
            (k) => `- Kill #${k.n} at ${k.at} s: ${k.replica} (pid ${k.pid}) during ${k.interrupted}`,
          ),
          ...problems.map((p) => `- **${p}**`),
        ],
      };
    } finally {
      await c.close();
    }
  },
};

/** A live slot whose ledger shows a publication `writing` (its merge under way), polled every 10 ms. */
async function writingSlot(c: Campaign, timeoutMs: number): Promise<Slot | undefined> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    for (const s of c.slots)
      if (s.run.alive && openPublications(s.dataDir, TABLE).writing.length > 0) return s;
    await sleep(10);
  }
  return undefined;
}

/** LanceDB's reading of the table's live rows, sorted by id ([] before the table exists). */
async function liveRows(uri: string): Promise<SourceRow[]> {
  const db = await lancedb.connect(uri, { readConsistencyInterval: 0 });
  try {
    if (!(await db.tableNames()).includes('records')) return [];
    const rows = (await (
      await db.openTable('records')
    )
      .query()
      .where('_deleted = false')
      .select(['id', 'name', 'note'])
      .toArray()) as { id: bigint; name: string; note: string | null }[];
    return rows.map((r) => ({ id: Number(r.id), name: r.name, note: r.note })).sort((a, b) => a.id - b.id);
  } finally {
    db.close();
  }
}

function firstDifference(read: readonly SourceRow[], expected: readonly SourceRow[]): string | undefined {
  for (let i = 0; i < Math.max(read.length, expected.length); i++) {
    const a = JSON.stringify(read[i] ?? null);
    const b = JSON.stringify(expected[i] ?? null);
    if (a !== b)
      return `row ${i}: Lance ${a.slice(0, 100)} ≠ PostgreSQL ${b.slice(0, 100)} (${read.length} vs ${expected.length} rows)`;
  }
  return undefined;
}
