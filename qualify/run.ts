import { mkdirSync, writeFileSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Command } from 'commander';
import type { QualifyContext, QualifyStep, QualifyStepReport } from './step';
import { STEPS } from './steps';
import { ensureIndependentReader, PYARROW, PYLANCE } from './support/independent-reader';
import { QUALIFY_DIR } from './support/paths';
import { ReplicaRun } from './support/replica';
import {
  LocalBroker,
  LocalCommitTable,
  LocalDebezium,
  LocalObjectStore,
  LocalSchemaRegistry,
} from './support/services';

export interface QualifyOptions {
  /** Step names to run (default: all). */
  readonly only?: readonly string[];
  readonly short: boolean;
  readonly seed: number;
  /** Where report.md and report.json go. */
  readonly outDir: string;
  /** Where the steps' data dirs, tables and logs go. */
  readonly workDir: string;
  /**
   * Brokers already running (the test suite's): used as they are, never stopped. A step
   * that stops the broker ('broker-control') then gets a broker of its own on `ownBrokerPort`.
   */
  readonly brokers?: readonly string[];
  /** The port of the broker the runner starts (deploy/kafka-local; its controller uses port+1). */
  readonly brokerPort: number;
  readonly ownBrokerPort?: number;
  readonly s3Port: number;
  readonly ddbPort: number;
  /** The port of the Schema Registry a step that needs one gets (used as it is when one runs there). */
  readonly registryPort: number;
  /** PostgreSQL's port for a step that needs Debezium (deploy/debezium-local; Connect on port + 1). */
  readonly debeziumPort: number;
  readonly log: (line: string) => void;
}

export interface StepOutcome extends QualifyStepReport {
  readonly name: string;
  readonly title: string;
  readonly seconds: number;
  readonly error?: string;
}

export interface QualifyReport {
  readonly passed: boolean;
  readonly startedAt: string;
  readonly seconds: number;
  readonly seed: number;
  readonly short: boolean;
  readonly command: string;
  readonly machine: string;
  readonly steps: readonly StepOutcome[];
}

/**
 * Runs the qualification steps one after another against real processes: a broker
 * (its own, or the one given), s3proxy for steps that need it, the independent reader's
 * venv; everything the runner started is stopped at the end, on failure and on SIGINT.
 */
export async function runQualification(o: QualifyOptions): Promise<QualifyReport> {
  const steps = selectSteps(o.only);
  const started = Date.now();
  const startedAt = new Date(started).toISOString();
  const cleanups: (() => Promise<void>)[] = [];
  const cleanUp = async () => {
    ReplicaRun.killAll();
    for (const c of cleanups.splice(0).reverse())
      await c().catch((e: unknown) => o.log(`cleanup: ${String(e)}`));
  };
  const onSigint = () => {
    o.log('SIGINT: stopping the replicas and the services this run started');
    void cleanUp().then(() => process.exit(130));
  };
  process.once('SIGINT', onSigint);
  const outcomes: StepOutcome[] = [];
  // A failure before a step's check (the reader's venv, a service that does not start, the
  // step's own set-up) is that step's outcome: the run always ends with its report.
  const failedBefore = (name: string, title: string, since: number, e: unknown): StepOutcome => {
    const error = e instanceof Error ? (e.stack ?? e.message) : String(e);
    return {
      name,
      title,
      seconds: Math.round((Date.now() - since) / 1000),
      passed: false,
      summary: `The step failed before its check: ${String(e)}`,
      details: ['```', error, '```'],
      error,
    };
  };
  try {
    let shared: LocalBroker | undefined;
    try {
      await ensureIndependentReader(o.log);
      shared = o.brokers ? undefined : new LocalBroker(o.brokerPort);
      if (shared) {
        const b = shared;
        if (await b.running())
          throw new Error(
            `a broker already runs on port ${o.brokerPort}: pass --brokers to use it, or another port`,
          );
        o.log(`starting the runner's Kafka broker on 127.0.0.1:${o.brokerPort}`);
        cleanups.push(() => b.stop());
        await b.start();
      }
    } catch (e) {
      outcomes.push(failedBefore('set-up', "The independent reader and the runner's broker", started, e));
      o.log(`── set-up: FAILED: ${String(e)}`);
      return report();
    }
    let own: LocalBroker | undefined;
    let store: LocalObjectStore | undefined;
    let commitTable: LocalCommitTable | undefined;
    let registry: LocalSchemaRegistry | undefined;
    let debezium: LocalDebezium | undefined;
    for (const s of steps) {
      const needs = s.needs ?? [];
      let broker: LocalBroker | undefined = shared;
      let brokers = o.brokers ?? shared!.brokers;
      const stepStarted = Date.now();
      let outcome: StepOutcome;
      try {
        if (!shared && needs.includes('broker-control')) {
          // Never stop a broker this run did not start: a shared one serves other suites.
          if (!own) {
            own = new LocalBroker(o.ownBrokerPort ?? o.brokerPort + 2);
            o.log(`starting a broker of its own for ${s.name} on 127.0.0.1:${own.port}`);
            const b = own;
            cleanups.push(() => b.stop());
            await own.start();
          }
          broker = own;
          brokers = own.brokers;
        }
        if (needs.includes('object-store') && !store) {
          store = new LocalObjectStore(o.s3Port);
          if (!(await store.running())) {
            o.log(`starting s3proxy on 127.0.0.1:${o.s3Port}`);
            const st = store;
            cleanups.push(() => st.stop());
            await store.start();
          }
        }
        if (needs.includes('commit-table') && !commitTable) {
          commitTable = new LocalCommitTable(o.ddbPort);
          if (!(await commitTable.running())) {
            o.log(`starting moto's DynamoDB on 127.0.0.1:${o.ddbPort}`);
            const ct = commitTable;
            cleanups.push(() => ct.stop());
            // Its first start installs moto from PyPI into the script's venv.
            await commitTable.start();
          } else {
            // Running already: start only makes sure the commit table is there.
            await commitTable.start();
          }
        }
        if (needs.includes('schema-registry') && !registry) {
          registry = new LocalSchemaRegistry(o.registryPort);
          if (!(await registry.running())) {
            o.log(`starting the Schema Registry on 127.0.0.1:${o.registryPort}`);
            const r = registry;
            cleanups.push(() => r.stop());
            await registry.start();
          }
        }
        if (needs.includes('debezium') && !debezium) {
          debezium = new LocalDebezium(o.debeziumPort, brokers);
          o.log(`starting PostgreSQL and Kafka Connect with Debezium on 127.0.0.1:${o.debeziumPort}`);
          const d = debezium;
          cleanups.push(() => d.stop());
          await debezium.start();
        }
        const workDir = path.join(o.workDir, s.name);
        mkdirSync(workDir, { recursive: true });
        const context: QualifyContext = {
          brokers,
          broker: {
            stop: async () => {
              if (!broker) throw new Error(`${s.name}: no broker of this run to stop`);
              await broker.stop();
            },
            start: async () => {
              if (!broker) throw new Error(`${s.name}: no broker of this run to start`);
              await broker.start();
            },
          },
          workDir,
          short: o.short,
          seed: o.seed,
          log: (line) => o.log(`[${s.name}] ${line}`),
          ...(store ? { objectStore: store } : {}),
          ...(commitTable ? { commitTable } : {}),
          ...(registry ? { schemaRegistry: registry } : {}),
          ...(debezium ? { debezium } : {}),
        };
        o.log(`── ${s.name}: ${s.title}${o.short ? ' (short)' : ''}; work dir ${workDir}`);
        const stepReport = await s.run(context);
        outcome = {
          name: s.name,
          title: s.title,
          seconds: Math.round((Date.now() - stepStarted) / 1000),
          ...stepReport,
        };
      } catch (e) {
        outcome = failedBefore(s.name, s.title, stepStarted, e);
      }
      ReplicaRun.killAll();
      outcomes.push(outcome);
      o.log(
        `── ${s.name}: ${outcome.passed ? 'PASSED' : 'FAILED'} in ${outcome.seconds} s: ${outcome.summary}`,
      );
    }
  } finally {
    await cleanUp();
    process.removeListener('SIGINT', onSigint);
  }
  return report();

  function report(): QualifyReport {
    return {
      passed: outcomes.length === steps.length && outcomes.every((s) => s.passed),
      startedAt,
      seconds: Math.round((Date.now() - started) / 1000),
      seed: o.seed,
      short: o.short,
      command: `npm run qualify --${o.only ? ` --only ${o.only.join(',')}` : ''}${o.short ? ' --short' : ''} --seed ${o.seed}`,
      machine: `${os.cpus().length} cores, ${(os.totalmem() / 1024 ** 3).toFixed(0)} GiB, Node ${process.version}, ${os.platform()} ${os.release()}`,
      steps: outcomes,
    };
  }
}

function selectSteps(only: readonly string[] | undefined): QualifyStep[] {
  if (!only || only.length === 0) return [...STEPS];
  const unknown = only.filter((n) => !STEPS.some((s) => s.name === n));
  if (unknown.length > 0)
    throw new Error(`unknown step ${unknown.join(', ')}; steps: ${STEPS.map((s) => s.name).join(', ')}`);
  return STEPS.filter((s) => only.includes(s.name));
}

export function reportMarkdown(r: QualifyReport): string {
  const lines = [
    '# kafka-lance qualification report',
    '',
    `Run \`${r.command}\` started ${r.startedAt}, took ${Math.floor(r.seconds / 60)} min ${r.seconds % 60} s on ${r.machine}.`,
    `Independent reader: ${PYLANCE}, ${PYARROW} (qualify/verify_table.py in qualify/.venv). Seed ${r.seed}: \`--seed ${r.seed}\` replays every random choice.`,
    '',
    `**Verdict: ${r.passed ? 'PASSED' : 'FAILED'}**`,
    '',
    '| step | item | verdict | duration |',
    '| --- | --- | --- | --- |',
    ...r.steps.map(
      (s) => `| ${s.name} | ${s.title} | ${s.passed ? 'passed' : '**FAILED**'} | ${s.seconds} s |`,
    ),
    '',
  ];
  for (const s of r.steps) {
    lines.push(
      `## ${s.title} (\`${s.name}\`): ${s.passed ? 'passed' : 'FAILED'}`,
      '',
      s.summary,
      '',
      ...s.details,
      '',
    );
  }
  return `${lines.join('\n').trimEnd()}\n`;
}

export function writeReport(r: QualifyReport, outDir: string): { md: string; json: string } {
  mkdirSync(outDir, { recursive: true });
  const md = path.join(outDir, 'report.md');
  const json = path.join(outDir, 'report.json');
  writeFileSync(md, reportMarkdown(r));
  writeFileSync(json, `${JSON.stringify(r, null, 2)}\n`);
  return { md, json };
}

async function main(): Promise<void> {
  const program = new Command('qualify')
    .description(
      'The qualification campaign of kafka-lance: its guarantees against real processes, brokers and stores',
    )
    .option('--only <names>', 'comma-separated step names')
    .option('--short', 'the short variant (smaller volumes, fewer kills)', false)
    .option('--seed <n>', 'seed of every random choice', String(Date.now() % 1_000_000))
    .option('--out <dir>', 'where report.md and report.json go', QUALIFY_DIR)
    .option('--work <dir>', 'where data dirs, tables and logs go')
    .option('--brokers <list>', 'use these running brokers (never stopped) instead of starting one')
    .parse();
  const opts = program.opts<{
    only?: string;
    short: boolean;
    seed: string;
    out: string;
    work?: string;
    brokers?: string;
  }>();
  const seed = Number(opts.seed);
  const stamp = new Date().toISOString().replace(/[-:]/g, '').slice(0, 15);
  const brokers = opts.brokers ?? process.env.KAFKA_LANCE_QUALIFY_BROKERS;
  const report = await runQualification({
    ...(opts.only ? { only: opts.only.split(',').map((s) => s.trim()) } : {}),
    short: opts.short,
    seed,
    outDir: path.resolve(opts.out),
    workDir: path.resolve(opts.work ?? path.join(QUALIFY_DIR, '.work', stamp)),
    ...(brokers ? { brokers: brokers.split(',') } : {}),
    brokerPort: Number(process.env.KAFKA_LOCAL_PORT ?? 19320),
    s3Port: Number(process.env.KAFKA_LANCE_QUALIFY_S3_PORT ?? process.env.S3_TEST_PORT ?? 19920),
    ddbPort: Number(process.env.KAFKA_LANCE_QUALIFY_DDB_PORT ?? process.env.DYNAMODB_TEST_PORT ?? 19930),
    registryPort: Number(
      process.env.KAFKA_LANCE_QUALIFY_REGISTRY_PORT ?? process.env.SCHEMA_REGISTRY_TEST_PORT ?? 18481,
    ),
    debeziumPort: Number(process.env.KAFKA_LANCE_QUALIFY_DEBEZIUM_PORT ?? 19840),
    log: (line) => console.log(`${new Date().toISOString().slice(11, 19)} ${line}`),
  });
  const files = writeReport(report, path.resolve(opts.out));
  console.log(
    `\n${report.passed ? 'PASSED' : 'FAILED'} in ${report.seconds} s; report: ${files.md} (and ${files.json})`,
  );
  process.exitCode = report.passed ? 0 : 1;
}

if (require.main === module) {
  main().catch((error: unknown) => {
    console.error(error);
    process.exit(2);
  });
}
