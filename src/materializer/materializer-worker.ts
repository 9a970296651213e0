/**
 * The materializer's thread: publications run here, off the main thread that
 * heartbeats for Kafka (a Lance add serializes for hundreds of milliseconds). It is
 * never terminated from outside: `stop` lets the running publication finish.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { errorMessage } from '../common/errors';
import { createLogger, type Logger } from '../common/logger';
import { tpKey } from '../common/offsets';
import { commitSafetyOf, publicationsInFlight } from '../lance/commit-rule';
import { SharedConnections } from '../lance/connect';
import { checkTableOpening } from '../lance/table-opening';
import { IndexUpkeep, UpkeepSlots } from './index-upkeep';
import { Materializer, sharedBudgets } from './materializer';
import type { PartitionOwnership } from '../ownership/partition-ownership';
import { TableSet, type DrainOutcome } from './table-set';
import type { MaterializerReply, MaterializerRequest, MaterializerWorkerInit } from './worker-protocol';
import { registerSecrets, secretValuesOf } from '../common/redaction';

/**
 * Tables whose turns run at once. A publication's time is mostly waits (fsyncs of its plan
 * and ledger, the Lance commit), so overlapping a few tables' turns multiplies what many
 * small tables publish (bench/many-tables-publication.md: 200 tables' MiB/s doubled from 1 to 4) while
 * the shared permits and reservation still bound the memory. One table is not affected.
 */
const TABLE_TURNS_IN_FLIGHT = 4;

async function main(): Promise<void> {
  const port = parentPort;
  if (!port) throw new Error('materializer-worker runs only as a worker thread');
  const init = workerData as MaterializerWorkerInit;
  // This thread loads no definition: its store's secrets are scrubbed from its lines too.
  registerSecrets(secretValuesOf({ client: {}, lance: init.lance }));
  const logger = createLogger({ level: init.logLevel as 'info', name: 'materializer' });
  const reply = (m: MaterializerReply) => port.postMessage(m);
  const { stagingRoot, lance, expectations, ...options } = init;
  const tableLoggers = new Map<string, Logger>();
  const tableLogger = (table: string): Logger => {
    let child = tableLoggers.get(table);
    if (!child) tableLoggers.set(table, (child = logger.child({ table })));
    return child;
  };
  // One set of permits and one source reservation for every table (DESIGN.md, "Materializer").
  const budgets = sharedBudgets(init);
  // One Lance connection per database for every table (and its index keeper).
  const connections = new SharedConnections();
  // One table's index round at a time: builds are CPU- and memory-heavy, and tables many.
  const indexSlots = new UpkeepSlots(1);
  const tables: TableSet = new TableSet({
    stagingRoot,
    logger,
    optimizeEveryMs: init.optimizeEveryMs,
    damageIsFatal: init.fixedTable !== undefined,
    ...(init.fixedTable !== undefined ? { alwaysServed: init.fixedTable } : {}),
    turnsInFlight: TABLE_TURNS_IN_FLIGHT,
    attemptsPerTurn: publicationsInFlight(
      commitSafetyOf(init.storeAtomic !== false),
      init.mode === 'streamed',
    ),
    open: async (table, tableDir) => {
      const target = { ...lance, table };
      // The start's checks of the fixed table, for every table: a refusal stalls only it.
      await checkTableOpening(target, expectations, connections);
      return Materializer.open({
        ...options,
        tableDir,
        lance: target,
        // Its lines name it (lance.optimized, publication.unresolvable, ...): many tables share this log.
        logger: tableLogger(table),
        shared: budgets,
        connections,
        // Stats after every publication too, not only after a round (a turn can drain a backlog).
        onPublished: () => {
          const report = tables.report(table);
          if (report) reply({ type: 'stats', tables: [report] });
        },
      });
    },
    upkeep: (table, served) =>
      new IndexUpkeep(
        { ...lance, table },
        init.indexes,
        init.indexEveryMs,
        served,
        tableLogger(table),
        (reports) => reply({ type: 'indexes', table, reports }),
        indexSlots,
        connections,
      ),
  });
  await tables.discover();
  let ownership: Map<ReturnType<typeof tpKey>, PartitionOwnership> | undefined;
  let ownershipSequence = 0;
  let stopping = false;
  let stopped: Promise<void> = Promise.resolve();
  let drainUntil = 0;
  let wake: (() => void) | undefined;
  port.on('message', (m: MaterializerRequest) => {
    if (m.type === 'ownership') {
      // Sequenced at the source too; this guards the planner against any reordering on the way.
      if (m.sequence <= ownershipSequence) return;
      ownershipSequence = m.sequence;
      ownership = new Map(m.partitions.map(([t, p, partition]) => [tpKey(t, p), partition]));
      tables.setOwnership(ownership);
    } else if (m.type === 'sealed') {
      tables.sealed(m.parts);
      return; // the next ownership snapshot (every pollMs) wakes the loop; no extra round
    } else {
      stopping = true;
      drainUntil = m.drainUntil;
      // From now on no turn and no compaction starts but the drain's.
      stopped = tables.stop();
      // No index build may begin while the drain runs: the stop waits for what is in flight.
      tables.abortUpkeep();
    }
    wake?.();
  });
  reply({ type: 'ready' });
  // Interrupted publications are finished at the start of every table's run (runOnce → resume).
  // Turns run in the table set's slots, on their own (table-set.ts): this loop only asks every
  // table for a turn every pollMs (or when the ownership changes) and reports.
  while (!stopping) {
    if (ownership) {
      tables.poll();
      reply({ type: 'stats', tables: tables.reports() });
    }
    if (stopping) break;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, init.pollMs);
      wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
    wake = undefined;
  }
  // The turns and the compaction in flight end (a Lance call is never abandoned); none starts after.
  await stopped;
  if (ownership) logDrain(await tables.drain(drainUntil), logger);
  await tables.stopUpkeep();
  reply({ type: 'stats', tables: tables.reports() });
  tables.close();
  reply({ type: 'stopped' });
  port.close();
}

/**
 * A graceful stop's last publications (DESIGN.md, "Scale-down and old epochs"): the
 * replica has committed, sealed and left the group, and the last snapshot (read after the
 * final commit) makes its staged rows ready. The table set publishes them, small groups
 * included, so that a replica scaled away leaves nothing committed on its volume; it
 * starts nothing after the deadline (a Lance add is never interrupted: the process would
 * crash). What is left stays resolvable by the next start on this data directory.
 */
function logDrain(outcome: DrainOutcome, logger: Logger): void {
  const sum = (k: 'parts' | 'waitingParts' | 'unresolvableParts' | 'retryingPlans') =>
    outcome.left.reduce((n, t) => n + t[k], 0);
  const failed = outcome.left.filter((t) => t.err !== undefined);
  const facts = {
    event: 'materializer.drained',
    publications: outcome.publications,
    rows: outcome.rows,
    left: sum('parts'),
    waitingParts: sum('waitingParts'),
    unresolvableParts: sum('unresolvableParts'),
    retryingPlans: sum('retryingPlans'),
    timedOut: outcome.timedOut,
    ...(outcome.left.length > 1
      ? {
          tablesLeft: outcome.left
            .filter((t) => t.parts > 0)
            .map((t) => ({ table: t.table, parts: t.parts })),
        }
      : {}),
  };
  if (facts.left === 0 && failed.length === 0) logger.info(facts, 'stop: every staged part published');
  else
    logger.warn(
      {
        ...facts,
        ...(failed.length > 0 ? { err: failed.map((t) => `${t.table}: ${t.err ?? ''}`).join('; ') } : {}),
      },
      'stop: staged parts left on this data directory; a replica started on it publishes them',
    );
}

main().catch((error: unknown) => {
  parentPort?.postMessage({ type: 'fatal', message: errorMessage(error) } satisfies MaterializerReply);
});
