import { type Command, Option } from 'commander';
import { errorMessage } from '../../common/errors';
import { brokersFromEnv, loadConsumer } from '../../config';
import { tableNameProblem } from '../../config/table-name';
import { DEFAULT_RETENTION, compact, parseDuration } from '../compact';
import { CliError, TableMissingError } from '../errors';
import { definitionTables } from '../tables';
import { formatBytes } from '../inspect';
import { plural } from '../plural';
import { consumerOption, dataDirOption, duration } from './options';

/** `kafka-lance compact`: compaction and version cleanup of a consumer's table, on demand. */
export function addCompactCommand(program: Command): void {
  program
    .command('compact')
    .description(
      'Compact the Lance tables of a consumer (LanceDB optimize: merge small fragments, update indexes) and remove versions that stopped being the latest more than --retention ago: every table of the definition, or the one named by --table. Safe while replicas run on a store with atomic commits; not beside a declared single writer (lance.singleWriter).',
    )
    .addOption(consumerOption())
    .addOption(dataDirOption)
    .option(
      '--table <name>',
      'compact only this table (default: every table of the definition: its staging directories, its table, and when it routes the tables of its Lance database whose names its template could produce; never the other tables of a shared Lance database)',
    )
    .addOption(
      new Option(
        '--retention <duration>',
        "keep versions newer than this (e.g. 30m, 1h, 7d); LanceDB's default is 7d",
      )
        .argParser(duration)
        .default(parseDuration(DEFAULT_RETENTION), DEFAULT_RETENTION),
    )
    .addOption(
      new Option(
        '--purge-deletes-older-than <duration>',
        "upsert tables: remove for good the delete rows (_deleted) that landed in the table longer ago than this (by its versions, not the records' timestamps); only when no replica can still publish an older record of those keys (docs/upserts-and-cdc.md)",
      ).argParser(duration),
    )
    .option(
      '--writers-stopped',
      'the table has no running writer (required when the definition declares lance.singleWriter)',
      false,
    )
    .addHelpText(
      'after',
      `
Example:
  kafka-lance compact -c consumers/app-logs.ts --data-dir data/demo --retention 1h
One table of a routing definition (without --table: only the tables its template could produce):
  kafka-lance compact -c consumers/orders-by-region.ts --table orders_eu`,
    )
    .action(
      async (opts: {
        consumer: string;
        dataDir?: string;
        retention: number;
        writersStopped: boolean;
        purgeDeletesOlderThan?: number;
        table?: string;
      }) => {
        // Compaction needs no broker: any value satisfies the definition's broker check.
        const consumer = loadConsumer(opts.consumer, process.env, {
          brokers: brokersFromEnv() ?? ['(not needed)'],
          dataDir: opts.dataDir,
        });
        if (consumer.lance.singleWriter && !opts.writersStopped) {
          // On a store without atomic commits, compact's commits beside the declared single
          // writer's could overwrite a publication: the operator must say the writer is stopped.
          throw new CliError(
            'BAD_ARGUMENT',
            `${consumer.name} declares lance.singleWriter: compact commits to the table too, so it runs only while that replica is stopped; stop it and pass --writers-stopped`,
          );
        }
        const tableProblem = opts.table !== undefined ? tableNameProblem(opts.table) : undefined;
        if (tableProblem !== undefined)
          // Never a path: a name that could leave the Lance database's directory is refused.
          throw new CliError(
            'BAD_ARGUMENT',
            `--table "${opts.table}" is not a table name: it ${tableProblem}`,
          );
        // Every table of the definition, or the one asked for (a missing one is an error then).
        const tables = opts.table !== undefined ? [opts.table] : await definitionTables(consumer);
        let compacted = 0;
        const failed: string[] = [];
        for (const table of tables) {
          let r;
          try {
            r = await compact(
              { ...consumer, table },
              opts.retention,
              opts.purgeDeletesOlderThan === undefined ? undefined : Date.now() - opts.purgeDeletesOlderThan,
            );
          } catch (error) {
            // With one table, its absence is the answer (TableMissingError says where it would be).
            if (tables.length === 1) throw error;
            // Among many, a table staged but never published has nothing to compact yet.
            if (error instanceof TableMissingError) {
              console.log(`Lance table ${table}: not created yet, nothing to compact`);
              continue;
            }
            // One table's failure is its own: the others are still compacted, and the command fails at the end.
            console.error(`Lance table ${table}: compaction failed: ${errorMessage(error)}`);
            failed.push(table);
            continue;
          }
          compacted += 1;
          const shape = (x: typeof r.before) =>
            `${plural(x.fragments, 'fragment')} (${x.smallFragments} small), ${plural(x.versions, 'version')} (current ${x.version}), ${x.rows} rows, ${formatBytes(x.bytes)}`;
          console.log(`Lance table ${table} at ${r.path}`);
          console.log(`  before: ${shape(r.before)}`);
          console.log(`  after:  ${shape(r.after)}`);
          console.log(
            `  compaction merged ${r.fragmentsRemoved} fragments into ${r.fragmentsAdded}; cleanup removed ${r.versionsRemoved} versions older than ${formatDuration(r.retentionMs)} (${formatBytes(r.bytesRemoved)})`,
          );
          if (r.purgedDeletes !== undefined)
            console.log(`  removed ${plural(r.purgedDeletes, 'delete row')} for good`);
          for (const i of r.indexes)
            console.log(
              `  index ${i.index} on ${i.column} (${i.type}): ${i.state}, ${i.indexedRows} indexed, ${i.unindexedRows} unindexed${i.error !== undefined ? ` (${i.error})` : ''}`,
            );
        }
        if (tables.length > 1) console.log(`compacted ${plural(compacted, 'table')} of ${tables.length}`);
        if (failed.length > 0)
          throw new CliError(
            'COMPACT_FAILED',
            `compaction failed for ${plural(failed.length, 'table')}: ${failed.join(', ')}`,
            {
              tables: failed,
            },
          );
      },
    );
}

/** The largest whole unit of a retention (`1h`, `90m`), as the operator would write it. */
function formatDuration(ms: number): string {
  if (ms === 0) return '0s';
  for (const [unit, size] of [
    ['d', 86_400_000],
    ['h', 3_600_000],
    ['m', 60_000],
    ['s', 1_000],
  ] as const) {
    if (ms >= size && ms % size === 0) return `${ms / size}${unit}`;
  }
  return `${ms}ms`;
}
