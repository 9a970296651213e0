import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { s3DatabaseUri, storageOptions } from '../../test/support/s3-local';
import type { CommitTable, DebeziumControl, ObjectStoreControl, SchemaRegistryControl } from '../step';
import { DEBEZIUM_LOCAL, DYNAMODB_LOCAL, KAFKA_LOCAL, S3_LOCAL, SCHEMA_REGISTRY_LOCAL } from './paths';

const run = promisify(execFile);

/**
 * A server of one of deploy/*'s scripts (`start | stop | status`) on its own port, run
 * asynchronously: the runner's event loop must keep reading the replicas' output while a
 * server restarts, or their pipes fill and they block.
 */
abstract class LocalServer {
  started = false;

  constructor(
    readonly port: number,
    private readonly script: string,
    private readonly portVariable: string,
    /** More of the script's environment (deploy/debezium-local: the brokers). */
    private readonly env: Readonly<Record<string, string>> = {},
  ) {}

  async running(): Promise<boolean> {
    return this.invoke('status').then(
      () => true,
      () => false,
    );
  }

  async start(): Promise<void> {
    await this.invoke('start');
    this.started = true;
  }

  async stop(): Promise<void> {
    await this.invoke('stop');
  }

  /** The script with arguments, in the server's environment. */
  protected async invoke(...args: string[]): Promise<string> {
    const { stdout } = await run(this.script, args, {
      env: { ...process.env, ...this.env, [this.portVariable]: String(this.port) },
      timeout: 240_000,
      maxBuffer: 64 * 1024 * 1024,
    });
    return stdout;
  }
}

/** A local KRaft broker of deploy/kafka-local on its own port (its controller on port+1). */
export class LocalBroker extends LocalServer {
  constructor(port: number) {
    super(port, KAFKA_LOCAL, 'KAFKA_LOCAL_PORT');
  }

  get brokers(): string[] {
    return [`127.0.0.1:${this.port}`];
  }
}

/** s3proxy of deploy/s3-local on its own port, as the ObjectStoreControl a step gets. */
export class LocalObjectStore extends LocalServer implements ObjectStoreControl {
  readonly storageOptions: Readonly<Record<string, string>>;

  constructor(port: number) {
    super(port, S3_LOCAL, 'S3_LOCAL_PORT');
    this.storageOptions = storageOptions(port);
  }

  databaseUri(prefix: string): string {
    return s3DatabaseUri(prefix);
  }
}

/** Apicurio Registry of deploy/schema-registry-local (its management port: port + 10, the script's default). */
export class LocalSchemaRegistry extends LocalServer implements SchemaRegistryControl {
  constructor(port: number) {
    super(port, SCHEMA_REGISTRY_LOCAL, 'SCHEMA_REGISTRY_LOCAL_PORT');
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}/apis/ccompat/v7`;
  }
}

/** moto's DynamoDB server of deploy/dynamodb-local, with its commit table (the script's default name). */
export class LocalCommitTable extends LocalServer implements CommitTable {
  readonly table = 'kafka-lance-commits';

  constructor(port: number) {
    super(port, DYNAMODB_LOCAL, 'DYNAMODB_LOCAL_PORT');
  }

  get endpoint(): string {
    return `http://127.0.0.1:${this.port}`;
  }
}

/** PostgreSQL and the Kafka Connect worker with Debezium of deploy/debezium-local (Connect on port + 1). */
export class LocalDebezium extends LocalServer implements DebeziumControl {
  constructor(port: number, brokers: readonly string[]) {
    super(port, DEBEZIUM_LOCAL, 'DEBEZIUM_LOCAL_PG_PORT', { DEBEZIUM_LOCAL_BROKERS: brokers.join(',') });
  }

  psql(sql: string): Promise<string> {
    return this.invoke('psql', '-At', '-c', sql);
  }

  async connector(name: string, config: Readonly<Record<string, string>>): Promise<void> {
    await this.invoke('connector', name, JSON.stringify(config));
  }

  async deleteConnector(name: string): Promise<void> {
    await fetch(`http://127.0.0.1:${this.port + 1}/connectors/${name}`, { method: 'DELETE' });
  }
}
