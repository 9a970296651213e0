import { errorMessage } from '../common/errors';
import type { Logger } from '../common/logger';
import { ConfigError } from '../config';
import { checkStoreReachable, type StoreProblem } from './object-store';
import { isObjectStoreUri, objectStoreProblems, redactStorageOptions } from './store-config';
import { probeCommitAtomicity, type StoreProbeVerdict } from './store-probe';

export interface LanceStoreSettings {
  readonly uri: string;
  readonly storageOptions?: Readonly<Record<string, string>>;
  readonly commits: 'probe' | 'atomic' | 'checked';
  readonly connectTimeoutMs: number;
}

export interface LanceStoreVerdict {
  /** Concurrent commits cannot overwrite each other: publications skip the settle wait. */
  readonly atomic: boolean;
  /** Where the verdict comes from. */
  readonly basis: 'local-directory' | 'probe' | 'configured' | 'probe-failed';
  readonly probe?: StoreProbeVerdict;
}

const FIELD_OF: Record<StoreProblem, string> = {
  endpoint: 'lance.storageOptions.endpoint',
  credentials: 'lance.storageOptions.aws_secret_access_key',
  bucket: 'lance.uri',
  timeout: 'lance.storageOptions.endpoint',
  other: 'lance.uri',
};

/**
 * What a replica does with its Lance store before it consumes: refuse a configuration
 * the store will not take (field-named, within `connectTimeoutMs`), then decide how
 * publications make sure of their commits. A local directory is atomic (Lance commits
 * with a rename that fails if the version exists). An object store is probed once
 * (concurrent adds on a scratch table under the same prefix, dropped afterwards)
 * unless the configuration says; a probe that cannot decide counts as not atomic,
 * since the check that follows is only slower, never wrong, on an atomic store.
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
  if (settings.commits !== 'probe') {
    const atomic = settings.commits === 'atomic';
    logger.info(
      { event: 'lance.store.probe', uri, atomic, basis: 'configured' },
      `commit atomicity configured (lance.commits: ${settings.commits}); not probed`,
    );
    return { atomic, basis: 'configured' };
  }
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
        : 'the store LOSES concurrent Lance commits (no put-if-absent): every publication is settled and counted before it is published',
    );
    return { atomic: probe.atomic, basis: 'probe', probe };
  } catch (error) {
    logger.warn(
      { event: 'lance.store.probe', uri, atomic: false, basis: 'probe-failed', err: errorMessage(error) },
      'the store probe could not decide; publications are settled and counted as on a store without put-if-absent',
    );
    return { atomic: false, basis: 'probe-failed' };
  }
}
