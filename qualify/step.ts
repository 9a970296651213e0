/**
 * One step of the qualification campaign (`npm run qualify`). Each step is a
 * module under qualify/steps/ that exports `step: QualifyStep`; qualify/run.ts runs them
 * one after another and writes qualify/report.md from their reports. A step proves one
 * guarantee against real processes (a real broker, real LanceDB tables on disk, SIGKILLs)
 * and says in its report what it did and what it checked, so that the report can be read
 * without the code.
 */
export interface QualifyContext {
  /** Bootstrap servers of the broker the runner started (127.0.0.1:port). */
  readonly brokers: readonly string[];
  /** How to stop and restart that broker (outage steps); the runner owns it. */
  readonly broker: {
    stop(): Promise<void>;
    start(): Promise<void>;
  };
  /** A fresh directory this step owns (data dirs, tables, logs). */
  readonly workDir: string;
  /** The short variant run inside `npm test`: same checks, smaller volumes, fewer kills. */
  readonly short: boolean;
  /** Seed for every random choice (kill moments, victims, fuzz); printed in the report. */
  readonly seed: number;
  /** Progress lines for the terminal (long steps print one every few seconds). */
  log(line: string): void;
  /** The S3 store (s3proxy) the runner started for a step that `needs` 'object-store'. */
  readonly objectStore?: ObjectStoreControl;
  /** The DynamoDB commit table (deploy/dynamodb-local) for a step that `needs` 'commit-table'. */
  readonly commitTable?: CommitTable;
  /** The Schema Registry (deploy/schema-registry-local) for a step that `needs` 'schema-registry'. */
  readonly schemaRegistry?: SchemaRegistryControl;
  /** PostgreSQL and Kafka Connect with Debezium (deploy/debezium-local) for a step that `needs` 'debezium'. */
  readonly debezium?: DebeziumControl;
}

/** PostgreSQL (wal_level=logical) and a Kafka Connect worker with Debezium's PostgreSQL connector. */
export interface DebeziumControl {
  /** PostgreSQL's port on 127.0.0.1 (user postgres, no password, database postgres). */
  readonly port: number;
  /** Runs SQL with psql (-At): its output. */
  psql(sql: string): Promise<string>;
  /** Creates or updates a connector with this configuration. */
  connector(name: string, config: Readonly<Record<string, string>>): Promise<void>;
  deleteConnector(name: string): Promise<void>;
}

/** A Confluent-compatible Schema Registry the runner started (or found running). */
export interface SchemaRegistryControl {
  /** The API base clients take as the registry URL. */
  readonly url: string;
}

/** A DynamoDB table Lance claims versions in (`s3+ddb://...?ddbTableName=<table>`). */
export interface CommitTable {
  /** The storage option `dynamodb_endpoint`. */
  readonly endpoint: string;
  readonly table: string;
}

/** A local S3-compatible store (deploy/s3-local) for object-storage tables; the runner owns it. */
export interface ObjectStoreControl {
  /** What LanceDB (`storageOptions`) and pylance (`storage_options`) need to reach it. */
  readonly storageOptions: Readonly<Record<string, string>>;
  /** A fresh database URI of its own in the bucket: `s3://<bucket>/<prefix>-<unique>`. */
  databaseUri(prefix: string): string;
  stop(): Promise<void>;
  start(): Promise<void>;
}

export interface QualifyStepReport {
  readonly passed: boolean;
  /** One paragraph: what was done and the verdict, with the numbers. */
  readonly summary: string;
  /** Markdown lines for the report's section of this step (tables, kill log, ranges lost). */
  readonly details: readonly string[];
}

export interface QualifyStep {
  /** Short id used on the command line (`npm run qualify -- --only kill-campaign`). */
  readonly name: string;
  /** The issue item it qualifies, for the report heading. */
  readonly title: string;
  /**
   * What the runner must provide besides the broker: 'object-store' starts s3proxy
   * (context.objectStore); 'commit-table' moto's DynamoDB with a commit table (context.commitTable);
   * 'schema-registry' Apicurio Registry (context.schemaRegistry); 'debezium' PostgreSQL and Kafka
   * Connect with Debezium (context.debezium); 'broker-control' says the step stops and restarts the broker,
   * so that a runner given a shared broker (the test suite's) runs it on a broker of its own.
   */
  readonly needs?: readonly (
    'object-store' | 'commit-table' | 'schema-registry' | 'debezium' | 'broker-control'
  )[];
  run(context: QualifyContext): Promise<QualifyStepReport>;
}
