import { errorMessage } from '../common/errors';
import type { Logger } from '../common/logger';
import { ConfigError } from '../config';
import type { StoreProblem } from './lance-errors';
import { checkStoreReachable } from './object-store';
import { checkCommitTable } from './commit-table';
import { checkCommitTableThroughLance } from './commit-table-probe';
import { isObjectStoreUri, objectStoreProblems, redactStorageOptions, uriScheme } from './store-config';
import { probeCommitAtomicity, type StoreProbeVerdict } from './store-probe';

export interface LanceStoreSettings {
  readonly uri: string;
  readonly storageOptions?: Readonly<Record<string, string>>;
  readonly commits: 'probe' | 'atomic';
  /** The operator declares this replica the table's only writer (lance.singleWriter). */
  readonly singleWriter: boolean;
  readonly connectTimeoutMs: number;
}

export interface LanceStoreVerdict {
  /** Concurrent commits cannot overwrite each other (false only for a declared single writer). */
  readonly atomic: boolean;
  /** Where the verdict comes from. */
  readonly basis: 'local-directory' | 'commit-table' | 'probe' | 'configured' | 'probe-failed';
  readonly probe?: StoreProbeVerdict;
}

const FIELD_OF: Record<StoreProblem, string> = {
  endpoint: 'lance.storageOptions.endpoint',
  credentials: 'lance.storageOptions.aws_secret_access_key',
  bucket: 'lance.uri',
  timeout: 'lance.storageOptions.endpoint',
  other: 'lance.uri',
};

/** A store that loses concurrent commits, and a replica not declared its table's only writer. */
export class NonAtomicStoreError extends ConfigError {
  constructor(configSource: string, uri: string, why: string) {
    super(configSource, [
      {
        field: 'lance.uri',
        message: `${why}: several replicas writing one table there lose publications. Use a store with conditional writes (If-None-Match on PUT: AWS S3, MinIO, Ceph RGW, s3proxy 4), or s3+ddb://<bucket>/<prefix>?ddbTableName=<table> with a DynamoDB commit table; or, if this replica is the table's only writer, set lance.singleWriter: true (${uri})`,
      },
    ]);
  }
}

/**
 * What a replica does with its Lance store before it consumes: refuse a configuration
 * the store will not take (field-named, within `connectTimeoutMs`), then make sure its
 * commits cannot be lost. A local directory is atomic (Lance commits with a rename that
 * fails if the version exists); so is s3+ddb:// once its DynamoDB commit table is there
 * with the key schema Lance needs. Any other object store is probed once (concurrent
 * appends racing on a scratch table under the same prefix, dropped afterwards) unless the
 * configuration says it is atomic. A store found not atomic, or whose probe could not
 * decide, is refused unless the operator declared this replica the table's only writer.
 */
export async function startLanceStore(
  settings: LanceStoreSettings,
  configSource: string,
  env: NodeJS.ProcessEnv,
  logger: Logger,
): Promise<LanceStoreVerdict> {
  const { uri, storageOptions } = settings;
  if (!isObjectStoreUri(uri)) return { atomic: true, basis: 'local-directory' };
  const problems = objectStoreProblems(uri, storageOptions, env);
  if (problems.length > 0) throw new ConfigError(configSource, problems);
  const reach = await checkStoreReachable(uri, storageOptions, settings.connectTimeoutMs);
  if (!reach.ok) {
    throw new ConfigError(configSource, [
      { field: FIELD_OF[reach.problem ?? 'other'], message: reach.message ?? 'the store failed' },
    ]);
  }
  logger.info(
    {
      event: 'lance.store.reachable',
      uri,
      storageOptions: redactStorageOptions(storageOptions),
      ms: reach.elapsedMs,
    },
    'object store answers',
  );
  if (uriScheme(uri) === 's3+ddb') {
    const signed = await checkCommitTable(uri, storageOptions, env, settings.connectTimeoutMs);
    // No static credentials to sign with: Lance checks with the ones it finds itself.
    const commitTable = signed.skipped
      ? await checkCommitTableThroughLance(uri, storageOptions, env, settings.connectTimeoutMs)
      : signed;
    if ('leftover' in commitTable && commitTable.leftover) {
      logger.warn(
        { event: 'lance.store.startCheckLeftover', uri, table: commitTable.leftover },
        'the start check could not drop its scratch table (the credentials may not delete): remove it by hand; the check passed',
      );
    }
    if (!commitTable.ok) {
      throw new ConfigError(configSource, [
        {
          field: commitTable.field ?? 'lance.uri',
          message: commitTable.message ?? 'commit table check failed',
        },
      ]);
    }
    logger.info(
      {
        event: 'lance.store.probe',
        uri,
        atomic: true,
        basis: 'commit-table',
        table: commitTable.table,
        endpoint: commitTable.endpoint,
        checkedBy: signed.skipped ? 'lance-commits' : 'describe-table',
      },
      signed.skipped
        ? 'commits are claimed in the DynamoDB commit table: two scratch commits through it succeeded with the credentials Lance found'
        : 'commits are claimed in the DynamoDB commit table, which has the key schema Lance needs',
    );
    return { atomic: true, basis: 'commit-table' };
  }
  if (settings.commits === 'atomic') {
    logger.info(
      { event: 'lance.store.probe', uri, atomic: true, basis: 'configured' },
      'commit atomicity configured (lance.commits: atomic); not probed',
    );
    return { atomic: true, basis: 'configured' };
  }
  let verdict: LanceStoreVerdict;
  let why: string;
  try {
    const probe = await probeCommitAtomicity({ uri, ...(storageOptions ? { storageOptions } : {}) });
    logger[probe.atomic ? 'info' : 'warn'](
      {
        event: 'lance.store.probe',
        uri,
        atomic: probe.atomic,
        basis: 'probe',
        expectedRows: probe.expectedRows,
        foundRows: probe.foundRows,
        rounds: probe.rounds.length,
        ms: probe.elapsedMs,
      },
      probe.atomic
        ? 'the store commits concurrent Lance appends atomically'
        : 'the store LOSES concurrent Lance commits (no atomic put-if-absent)',
    );
    if (probe.atomic) return { atomic: true, basis: 'probe', probe };
    verdict = { atomic: false, basis: 'probe', probe };
    why = `the store lost concurrent Lance commits at start (${probe.foundRows} of ${probe.expectedRows} rows of racing appends kept)`;
  } catch (error) {
    logger.warn(
      { event: 'lance.store.probe', uri, atomic: false, basis: 'probe-failed', err: errorMessage(error) },
      'the store probe could not decide whether concurrent commits are atomic',
    );
    verdict = { atomic: false, basis: 'probe-failed' };
    why = `the start probe could not tell whether the store commits concurrent Lance appends atomically (${errorMessage(error).slice(0, 200)})`;
  }
  if (!settings.singleWriter) throw new NonAtomicStoreError(configSource, uri, why);
  logger.warn(
    { event: 'lance.store.singleWriter', uri, basis: verdict.basis },
    'the store does not commit concurrent appends atomically; publishing as the table\u2019s declared only writer (lance.singleWriter): no other process may write this table',
  );
  return verdict;
}
