import * as os from 'node:os';
import * as path from 'node:path';
import { KafkaLanceError } from '../common/errors';
import { registerSecrets, secretValuesOf } from '../common/redaction';
import { consumerDefinitionSchema, type ConsumerDefinition } from './consumer-definition';
import type { DeclaredField, FieldSpecOutput, NamedField } from './field-spec';
import { tlsMaterialProblems } from './tls-material';
import { resolveSecrets, type SecretProblem, type WithSecretsResolved } from './secret';
import { tableRoutingOf, type TableRouting } from './table-routing';
import { SEQUENCE_COLUMN, tombstonesOf, withSequenceColumn, type Tombstones } from './upsert-options';

/** A configuration that fails validation; the message names every offending field. */
export class ConfigError extends KafkaLanceError {
  constructor(
    readonly source: string,
    readonly problems: readonly { field: string; message: string }[],
  ) {
    super(
      'CONFIG_INVALID',
      // One problem is one line (what an operator's log search and an alert show); several are a list.
      problems.length === 1
        ? `invalid consumer definition ${source}: ${problems[0]!.field}: ${problems[0]!.message}`
        : `invalid consumer definition ${source}:\n${problems.map((p) => `  - ${p.field}: ${p.message}`).join('\n')}`,
      { context: { source, problems } },
    );
  }
}

/** The record key's column (src/decode/batch-columns.ts KEY_COLUMN; config does not import decode). */
const KEY_COLUMN_NAME = '_key';

/** A declared column: name, nullability and its normalized type (nested ones included). */
export type ResolvedField = NamedField;

/** A validated definition with every default and environment fallback applied. */
export interface ResolvedConsumer extends Omit<
  ConsumerDefinition,
  | 'brokers'
  | 'topics'
  | 'groupId'
  | 'table'
  | 'dataDir'
  | 'workers'
  | 'tombstones'
  | 'client'
  | 'schemaRegistry'
  | 'lance'
> {
  /** What a null value is, its default applied (upsert-options.ts, `tombstonesOf`). */
  readonly tombstones: Tombstones;
  /**
   * Upsert mode: the columns of a row's key, in order (`_key` for the record key, else
   * the declared key fields); undefined in append mode.
   */
  readonly upsertKey: readonly string[] | undefined;
  /** The sections holding secret options, with every `${env:…}` and `{ file }` reference read. */
  readonly client: WithSecretsResolved<ConsumerDefinition['client']>;
  readonly schemaRegistry: WithSecretsResolved<ConsumerDefinition['schemaRegistry']>;
  readonly lance: WithSecretsResolved<ConsumerDefinition['lance']>;
  readonly brokers: string[];
  readonly workers: number;
  readonly groupId: string;
  /** The topics named (not patterns), or undefined when only patterns are given. */
  readonly topics: string[] | undefined;
  /** Patterns over the broker's topics: the `{ pattern }`s of `topics`, and `topicsRegex`. */
  readonly topicPatterns: string[];
  /** One table's name, or a `{topic}` template (see tableRouting). */
  readonly table: string;
  /** Which table each record goes to (table-routing.ts). */
  readonly tableRouting: TableRouting;
  readonly dataDir: string;
  /** Explicit fields in declaration order, or undefined when the schema is inferred. */
  readonly fields: readonly ResolvedField[] | undefined;
  /** Where the definition came from (a file path), for messages and workers. */
  readonly source: string;
}

/** Brokers from the environment: KAFKA_BOOTSTRAP_SERVERS (Connect's name), or its alias KAFKA_BROKERS. */
export function brokersFromEnv(env: NodeJS.ProcessEnv = process.env): string[] | undefined {
  const raw = env.KAFKA_BOOTSTRAP_SERVERS ?? env.KAFKA_BROKERS;
  const list = raw
    ?.split(',')
    .map((b) => b.trim())
    .filter(Boolean);
  return list && list.length > 0 ? list : undefined;
}

/**
 * Staging worker threads when the definition names none: none on a machine of two cores
 * or fewer (staging runs on the main thread), two above. With the native decoder
 * staging a GiB of JSON takes ~5 CPU seconds, which the main thread has room for; on two
 * cores a worker thread only adds an isolate to collect, a copy of every batch into
 * transfer buffers and a thread to schedule beside the materializer and LanceDB's. On
 * the bench's 1M backlog, in alternating rounds, the main thread took 18–25 CPU s/GiB at
 * 409–427 MiB peak RSS against one worker's 20–28 at 495–539 MiB, and one worker had
 * beaten two (bench/hot-path-levers.md, sections 13 and 15).
 */
export function defaultStagingWorkers(cores: number = os.availableParallelism()): number {
  return cores <= 2 ? 0 : 2;
}

/** Values from the command line: they win over the environment, which wins over the file. */
export interface ConsumerOverrides {
  readonly brokers?: readonly string[];
  readonly dataDir?: string;
}

export function resolveConsumer(
  input: unknown,
  source: string,
  env: NodeJS.ProcessEnv = process.env,
  overrides: ConsumerOverrides = {},
): ResolvedConsumer {
  const parsed = consumerDefinitionSchema.safeParse(input);
  if (!parsed.success) throw new ConfigError(source, fieldProblems(parsed.error.issues, []));
  const def = parsed.data;
  const brokers = overrides.brokers ? [...overrides.brokers] : (brokersFromEnv(env) ?? def.brokers);
  if (!brokers) {
    throw new ConfigError(source, [
      {
        field: 'brokers',
        message: 'no brokers: set "brokers" or KAFKA_BOOTSTRAP_SERVERS (alias KAFKA_BROKERS)',
      },
    ]);
  }
  const keyFields =
    def.mode === 'upsert' && def.key !== undefined && def.key !== 'record-key' ? def.key.fields : [];
  // A key field is never null: a record without it names no row (a dead letter), and
  // Lance's primary key takes only non-nullable columns.
  const fields =
    def.schema === 'infer'
      ? undefined
      : Object.entries(def.schema.fields).map(([name, spec]) => ({
          name,
          ...declaredField(spec),
          // A Debezium delete's row holds its key only: the other columns take nulls.
          ...(keyFields.includes(name)
            ? { nullable: false }
            : def.envelope === 'debezium'
              ? { nullable: true }
              : {}),
        }));
  const recordKey = def.mode === 'upsert' && def.key === 'record-key';
  if (def.eventTimeField && fields && !fields.some((f) => f.name === def.eventTimeField)) {
    throw new ConfigError(source, [
      { field: 'eventTimeField', message: `"${def.eventTimeField}" is not a field of the schema` },
    ]);
  }
  // Relative secret files are read from the definition's folder, as its author sees them.
  const baseDir = path.dirname(path.resolve(source));
  const secretProblems: SecretProblem[] = [];
  const client = resolveSecrets(def.client, env, baseDir, secretProblems, ['client']);
  const schemaRegistry = resolveSecrets(def.schemaRegistry, env, baseDir, secretProblems, ['schemaRegistry']);
  const lance = resolveSecrets(def.lance, env, baseDir, secretProblems, ['lance']);
  if (secretProblems.length > 0) throw new ConfigError(source, secretProblems);
  const tlsProblems = [
    ...(typeof client.ssl === 'object' ? tlsMaterialProblems(client.ssl, 'client.ssl') : []),
    ...(typeof schemaRegistry?.ssl === 'object'
      ? tlsMaterialProblems(schemaRegistry.ssl, 'schemaRegistry.ssl')
      : []),
  ];
  if (tlsProblems.length > 0) throw new ConfigError(source, tlsProblems);
  // From here on every text this process writes has them scrubbed (src/common/redaction.ts).
  registerSecrets(secretValuesOf({ client, lance, schemaRegistry }));
  const table = def.table ?? def.name;
  const topicNames = def.topics?.filter((t): t is string => typeof t === 'string') ?? [];
  return {
    ...def,
    topics: topicNames.length > 0 ? topicNames : undefined,
    topicPatterns: [
      ...(def.topics ?? []).flatMap((t) => (typeof t === 'string' ? [] : [t.pattern])),
      ...(def.topicsRegex === undefined ? [] : [def.topicsRegex]),
    ],
    table,
    tableRouting: tableRoutingOf(table, def.route),
    client,
    schemaRegistry,
    lance,
    brokers,
    groupId: def.groupId ?? `kafka-lance-${def.name}`,
    dataDir: path.resolve(overrides.dataDir ?? env.KAFKA_LANCE_DATA_DIR ?? def.dataDir ?? 'data'),
    workers: def.workers ?? defaultStagingWorkers(),
    fields: withSequenceColumn(fields, def.sequence, {
      name: SEQUENCE_COLUMN,
      type: 'int64',
      nullable: true,
    }),
    // The record key is a row's key: read into `_key` whether or not includeKey says so.
    includeKey: def.includeKey || recordKey,
    tombstones: tombstonesOf(def),
    upsertKey: def.mode !== 'upsert' ? undefined : recordKey ? [KEY_COLUMN_NAME] : keyFields,
    source,
  };
}

/** A field as written (a bare name or an object) → its normalized type, nested fields included. */
export function declaredField(spec: FieldSpecOutput): DeclaredField {
  if (typeof spec === 'string') return { type: spec, nullable: true };
  switch (spec.type) {
    case 'list':
      return { type: 'list', items: declaredField(spec.items), nullable: spec.nullable };
    case 'struct':
      return {
        type: 'struct',
        fields: Object.entries(spec.fields).map(([name, child]) => ({ name, ...declaredField(child) })),
        nullable: spec.nullable,
      };
    default: {
      // Optional keys that zod left undefined are dropped: a field equals its bare-name form.
      const entries = Object.entries(spec).filter(([, v]) => v !== undefined);
      return Object.fromEntries(entries) as DeclaredField;
    }
  }
}

interface Issue {
  readonly code: string;
  readonly path: readonly PropertyKey[];
  readonly message: string;
  readonly errors?: readonly (readonly Issue[])[];
}

/**
 * zod issues as field-named problems. A union that matched no branch reports the
 * branch that got furthest (the deepest paths), so `schema: {fields: {id: 'uuid'}}`
 * names `schema.fields.id` instead of a bare "Invalid input" at `schema`.
 */
function fieldProblems(
  issues: readonly Issue[],
  prefix: readonly PropertyKey[],
): { field: string; message: string }[] {
  return issues.flatMap((issue) => {
    const here = [...prefix, ...issue.path];
    if (issue.code === 'invalid_union' && issue.errors && issue.errors.length > 0) {
      const depth = (branch: readonly Issue[]) => Math.max(...branch.map((i) => i.path.length));
      const best = issue.errors.reduce((a, b) => (depth(b) > depth(a) ? b : a));
      return fieldProblems(best, here);
    }
    return [{ field: here.map(String).join('.') || '(definition)', message: issue.message }];
  });
}
