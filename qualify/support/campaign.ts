import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { Kafka, logLevel, type Admin } from 'kafkajs';
import type { QualifyContext } from '../step';
import { openPublications, type OpenPublications } from './ledger-state';
import { interrupted, lastEvents, ReplicaRun, type ReplicaEvent } from './replica';
import { startProduction, type Production, type ProductionOptions } from './producer';
import { Random } from './random';
import { createTopicReady } from './topics';

export const TABLE = 'records';

export interface CampaignOptions {
  readonly context: QualifyContext;
  /** Prefix of the topic and group names. */
  readonly name: string;
  readonly partitions: number;
  readonly replicas: number;
  /** The shared Lance table's database: a directory (default <workDir>/lance) or s3:// with storage options. */
  readonly lance?: { readonly uri: string; readonly storageOptions?: Readonly<Record<string, string>> };
  /** The rate-bounded round-robin producer of startProduction() (steps that produce otherwise leave it out). */
  readonly production?: Omit<ProductionOptions, 'brokers' | 'topic' | 'partitions' | 'seed'>;
  readonly sessionTimeoutMs: number;
  /** More of the consumer definition (overrides). */
  readonly definition?: Record<string, unknown>;
  /** Topic-level settings of the campaign's topic (cleanup.policy, segment.ms, ...). */
  readonly topicConfig?: Readonly<Record<string, string>>;
  /** Environment of every replica process (test seams such as KAFKA_LANCE_TEST_MAX_CHAIN_BYTES). */
  readonly env?: Readonly<Record<string, string>>;
}

/** One replica's place in the campaign: its data dir outlives its processes. */
export interface Slot {
  readonly label: string;
  readonly dataDir: string;
  readonly logFile: string;
  run: ReplicaRun;
  readonly runs: ReplicaRun[];
}

export interface KillRecord {
  readonly n: number;
  /** Seconds since the campaign started. */
  readonly at: number;
  readonly replica: string;
  readonly pid: number;
  /** What the campaign aimed at (the moment it waited for). */
  readonly aimedAt: string;
  /** What the replica was doing, from its own events since it started. */
  readonly interrupted: string;
  readonly lastEvents: string;
  /** Seconds the killed process had run. */
  readonly uptime: number;
}

/**
 * The workload every qualification step of items 1 and 2 shares: a fresh topic, N
 * replicas of a consumer of checksummed JSON records (one data dir each, one shared
 * Lance table), a producer at a bounded rate, and the means to hurt them: SIGKILL a
 * replica (recording what it interrupted) and restart it from its data dir, SIGSTOP
 * and SIGCONT it.
 */
export class Campaign {
  readonly topic: string;
  readonly groupId: string;
  readonly definitionFile: string;
  readonly lanceUri: string;
  readonly storageOptions: Readonly<Record<string, string>>;
  readonly slots: Slot[] = [];
  readonly kills: KillRecord[] = [];
  readonly notes: string[] = [];
  readonly started = Date.now();
  readonly random: Random;
  production: Production | undefined;
  readonly #kafka: Kafka;
  #admin: Admin | undefined;

  constructor(readonly o: CampaignOptions) {
    const ctx = o.context;
    const unique = `${Date.now().toString(36)}-${ctx.seed}`;
    this.topic = `qualify-${o.name}-${unique}`;
    const consumerName = `qualify-${o.name}-${unique}`;
    this.groupId = `kafka-lance-${consumerName}`;
    this.lanceUri = o.lance?.uri ?? path.join(ctx.workDir, 'lance');
    this.storageOptions = o.lance?.storageOptions ?? {};
    this.random = new Random(ctx.seed);
    this.#kafka = new Kafka({
      clientId: 'kafka-lance-qualify',
      brokers: [...ctx.brokers],
      logLevel: logLevel.NOTHING,
      connectionTimeout: 3_000,
    });
    mkdirSync(path.join(ctx.workDir, 'logs'), { recursive: true });
    this.definitionFile = path.join(ctx.workDir, `${consumerName}.json`);
    writeFileSync(
      this.definitionFile,
      JSON.stringify(
        {
          name: consumerName,
          topics: [this.topic],
          table: TABLE,
          format: 'json',
          schema: {
            fields: {
              n: { type: 'int64', nullable: false },
              payload: { type: 'string', nullable: false },
              sha: { type: 'string', nullable: false },
            },
          },
          // Dead letters go to each replica's own file (<dataDir>/dead-letter/<name>.jsonl).
          errors: { tolerance: 'all' },
          durabilityIntervalMs: 500,
          sessionTimeoutMs: o.sessionTimeoutMs,
          heartbeatIntervalMs: 1_000,
          workers: 1,
          staging: { maxPartAgeMs: 2_000 },
          materializer: { maxPublicationDelayMs: 1_000, pollMs: 250 },
          lance: {
            uri: this.lanceUri,
            ...(o.lance?.storageOptions ? { storageOptions: o.lance.storageOptions } : {}),
          },
          ...o.definition,
        },
        null,
        2,
      ),
    );
  }

  get admin(): Admin {
    return this.#admin!;
  }

  /** The campaign's client (steps that produce or read the topic themselves). */
  get kafka(): Kafka {
    return this.#kafka;
  }

  /** Seconds since the campaign started, for the logs and the report. */
  at(t = Date.now()): number {
    return Math.round((t - this.started) / 100) / 10;
  }

  log(line: string): void {
    this.o.context.log(`${this.at().toFixed(1).padStart(6)} s  ${line}`);
  }

  /** The topic, then the replicas (each in the group before this returns). */
  async setUp(): Promise<void> {
    await this.createTopic();
    await this.startReplicas();
  }

  /** Connects the admin client and creates the campaign's topic (with `topicConfig`). */
  async createTopic(): Promise<void> {
    this.#admin = this.#kafka.admin();
    await this.#admin.connect();
    await createTopicReady(this.#admin, this.topic, this.o.partitions, this.o.topicConfig);
  }

  /** Starts the replicas on their data dirs and waits until each has joined the group. */
  async startReplicas(): Promise<void> {
    for (let i = 1; i <= this.o.replicas; i++) {
      const label = `replica-${i}`;
      const dataDir = path.join(this.o.context.workDir, label);
      const logFile = path.join(this.o.context.workDir, 'logs', `${label}.log`);
      const run = this.#spawn(label, dataDir, logFile);
      this.slots.push({ label, dataDir, logFile, run, runs: [run] });
    }
    for (const s of this.slots) {
      if (!(await s.run.seen('kafka.join', 120_000)))
        throw new Error(`${s.label} did not join the group within 120 s; see ${s.logFile}`);
    }
    this.log(`${this.slots.length} replicas in the group on ${this.topic}`);
  }

  #spawn(label: string, dataDir: string, logFile: string, definitionFile = this.definitionFile): ReplicaRun {
    return new ReplicaRun(label, dataDir, definitionFile, this.o.context.brokers, logFile, {
      ...this.o.env,
    });
  }

  /**
   * A definition file like the campaign's (same name, group, topic and table) with
   * `overrides` on top: a replica run with other settings on the same data dir.
   */
  variantDefinition(suffix: string, overrides: Record<string, unknown>): string {
    const definition = JSON.parse(readFileSync(this.definitionFile, 'utf8')) as Record<string, unknown>;
    const file = path.join(
      this.o.context.workDir,
      `${path.basename(this.definitionFile, '.json')}-${suffix}`,
      `${path.basename(this.definitionFile)}`,
    );
    mkdirSync(path.dirname(file), { recursive: true });
    writeFileSync(file, JSON.stringify({ ...definition, ...overrides }, null, 2));
    return file;
  }

  /** A new slot (a replica on a fresh data dir), started now; call `seen('kafka.join')` to wait for it. */
  addSlot(label: string, definitionFile = this.definitionFile): Slot {
    const dataDir = path.join(this.o.context.workDir, label);
    const logFile = path.join(this.o.context.workDir, 'logs', `${label}.log`);
    const run = this.#spawn(label, dataDir, logFile, definitionFile);
    const slot: Slot = { label, dataDir, logFile, run, runs: [run] };
    this.slots.push(slot);
    return slot;
  }

  /** `encode`: the value of each good record (a registry format's serializer), default its JSON. */
  startProduction(extra: Pick<ProductionOptions, 'encode'> = {}): Production {
    if (!this.o.production) throw new Error('this campaign has no production options');
    this.production = startProduction({
      ...this.o.production,
      ...extra,
      brokers: this.o.context.brokers,
      topic: this.topic,
      partitions: this.o.partitions,
      seed: this.o.context.seed,
    });
    return this.production;
  }

  /** SIGKILLs the slot's process now and records what it interrupted. */
  async kill(slot: Slot, aimedAt: string): Promise<KillRecord> {
    const run = slot.run;
    const events = [...run.events];
    const open = openPublications(slot.dataDir, TABLE);
    await run.kill();
    const what = describeKill(interrupted(events), open);
    const record: KillRecord = {
      n: this.kills.length + 1,
      at: this.at(),
      replica: slot.label,
      pid: run.pid,
      aimedAt,
      interrupted: what,
      lastEvents: lastEvents(events),
      uptime: Math.round((Date.now() - run.startedAt) / 100) / 10,
    };
    this.kills.push(record);
    this.log(`kill #${record.n}: SIGKILL ${slot.label} (pid ${record.pid}) during ${record.interrupted}`);
    return record;
  }

  /** A new process on the slot's data dir (the killed one's staging, ledger and claims). */
  restart(slot: Slot, definitionFile = this.definitionFile): ReplicaRun {
    slot.run = this.#spawn(slot.label, slot.dataDir, slot.logFile, definitionFile);
    slot.runs.push(slot.run);
    this.log(`restarted ${slot.label} from ${slot.dataDir} (pid ${slot.run.pid})`);
    return slot.run;
  }

  /** Waits for the next event of a run that passes `test`. */
  next(run: ReplicaRun, test: (e: ReplicaEvent) => boolean, timeoutMs: number) {
    return run.next(test, timeoutMs);
  }

  /** Restarts every slot whose process has stopped, and waits until each has joined the group. */
  async restartStopped(): Promise<void> {
    const started = this.slots.filter((s) => !s.run.alive).map((s) => ({ s, run: this.restart(s) }));
    for (const { s, run } of started) {
      if (!(await run.seen('kafka.join', 120_000)))
        throw new Error(`${s.label} did not join the group within 120 s; see ${s.logFile}`);
    }
  }

  /** The Prometheus text of a live run's metrics endpoint (its port from its `metrics.listening` event). */
  async metrics(run: ReplicaRun): Promise<string> {
    const listening = await run.seen('metrics.listening', 30_000);
    if (!listening) throw new Error(`${run.label} logged no metrics port`);
    return run.process.metricsText();
  }

  /** Gracefully stops every live replica (flush, commit, finish publications). */
  async stopAll(): Promise<void> {
    await Promise.all(
      this.slots.map(async (s) => {
        if (!s.run.alive) return;
        const exit = await s.run.stop();
        if (exit.code !== 0) this.notes.push(`${s.label} exited ${JSON.stringify(exit)} on SIGTERM`);
      }),
    );
  }

  /** Kills whatever still runs (a failure path), then lets go of the admin client. */
  async close(): Promise<void> {
    this.production?.stop();
    await Promise.all(this.slots.filter((s) => s.run.alive).map((s) => s.run.kill()));
    await this.#admin?.disconnect().catch(() => undefined);
  }

  /** Errors and fatal events the replicas logged (level ≥ 50), for the report. */
  errorEvents(): string[] {
    const out: string[] = [];
    for (const s of this.slots)
      for (const r of s.runs)
        for (const e of r.events)
          if (e.level >= 50)
            out.push(
              `${s.label} pid ${r.pid} at ${this.at(e.time)} s: ${e.event} ${text(e.line.msg)} ${errText(e.line.err)}`.slice(
                0,
                300,
              ),
            );
    return out;
  }

  /** Counts of an event over every run of every replica. */
  count(event: string): number {
    return this.slots.reduce(
      (n, s) => n + s.runs.reduce((m, r) => m + r.events.filter((e) => e.event === event).length, 0),
      0,
    );
  }
}

/**
 * What a kill interrupted: the replica's own events say which phase it was in; its
 * ledger says whether a publication was open, and in a replica still recovering or
 * joining, an open one is an earlier kill's, waiting to be resumed.
 */
function describeKill(phase: string, open: OpenPublications): string {
  const ledger =
    open.writing.length > 0
      ? `${open.writing.length} in \`writing\`: its Lance add under way or done but not marked published`
      : open.planned.length > 0
        ? `${open.planned.length} planned, its parts being prepared`
        : '';
  if (!ledger) return phase;
  if (phase.startsWith('recovery') || phase.startsWith('group join'))
    return `${phase}; ledger: ${ledger} (left by an earlier kill)`;
  return `publication (${ledger})`;
}

function text(value: unknown): string {
  if (value === undefined || value === null) return '';
  return typeof value === 'string' ? value : JSON.stringify(value);
}

function errText(err: unknown): string {
  if (typeof err === 'object' && err !== null && 'message' in err) return text(err.message);
  return text(err);
}
