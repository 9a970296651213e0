/**
 * The Schema Registry of the registry-format arms: SCHEMA_REGISTRY_URL, else
 * deploy/schema-registry-local started here (when not already running) and stopped after.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import * as path from 'node:path';

const REPO = path.resolve(__dirname, '../../..');
const REGISTRY_SCRIPT = path.join(REPO, 'deploy/schema-registry-local/schema-registry-local');

/** Runs `use` with a registry's URL. */
export async function withRegistry<T>(
  log: (line: string) => void,
  use: (url: string) => Promise<T>,
): Promise<T> {
  const given = process.env.SCHEMA_REGISTRY_URL;
  const wasRunning = given !== undefined || spawnSync(REGISTRY_SCRIPT, ['status']).status === 0;
  if (!wasRunning) {
    log('starting the local Schema Registry (deploy/schema-registry-local)');
    execFileSync(REGISTRY_SCRIPT, ['start'], { stdio: ['ignore', 'inherit', 'inherit'] });
  }
  const url = given ?? execFileSync(REGISTRY_SCRIPT, ['url'], { encoding: 'utf8' }).trim();
  try {
    return await use(url);
  } finally {
    if (!wasRunning) {
      log('stopping the local Schema Registry');
      execFileSync(REGISTRY_SCRIPT, ['stop'], { stdio: ['ignore', 'inherit', 'inherit'] });
    }
  }
}

/**
 * The topic of a registry arm's records: a topic is reused when it holds the records, and its
 * values name a schema id of one registry (a registry started afresh may give the id to another
 * schema), so the name says which registry and id.
 */
export function registryTopic(format: string, records: number, url: string, schemaId: number): string {
  const registry = createHash('sha256').update(url).digest('hex').slice(0, 8);
  return `bench-logs-${format}-${records}-${registry}-${schemaId}`;
}

/**
 * BENCH_CPU_PROF_DIR: the registry arms' replicas run under --cpu-prof, each into a directory
 * of its own there (bench/lib/cpu-profile.ts reads them), for their per-stage account.
 */
export function profiled(armId: string): { nodeArgs?: string[] } {
  const dir = process.env.BENCH_CPU_PROF_DIR;
  return dir ? { nodeArgs: ['--cpu-prof', `--cpu-prof-dir=${path.join(dir, armId)}`] } : {};
}
