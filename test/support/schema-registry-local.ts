import * as path from 'node:path';
import { leasedLocalServer } from './leased-local-server';
import { runBounded } from './run-bounded';

/**
 * The registries of the test run, each on a port of its own (management: port + 10).
 * Suites run in parallel, and a suite that stops or resets its registry stops whatever
 * runs on that port: two sharing one once killed a registry a second into its start.
 */
/** The suites' shared registry (away from a demo registry on 8081). */
export const TEST_SCHEMA_REGISTRY_PORT = Number(process.env.SCHEMA_REGISTRY_TEST_PORT ?? 18081);
/** The outage suite's, which it stops and freezes. */
export const OUTAGE_SCHEMA_REGISTRY_PORT = Number(
  process.env.SCHEMA_REGISTRY_OUTAGE_PORT ?? TEST_SCHEMA_REGISTRY_PORT + 1,
);
/** The script suite's, which it resets, restarts and stops. */
export const SCRIPT_SCHEMA_REGISTRY_PORT = Number(
  process.env.SCHEMA_REGISTRY_TEST_SCRIPT_PORT ?? TEST_SCHEMA_REGISTRY_PORT + 2,
);
/** The one the Avro demo's test lets the demo start and stop at its end. */
export const DEMO_SCHEMA_REGISTRY_PORT = TEST_SCHEMA_REGISTRY_PORT + 3;

const DEPLOY = path.resolve(__dirname, '../../deploy/schema-registry-local');
const SCRIPT = path.join(DEPLOY, 'schema-registry-local');

/**
 * Runs deploy/schema-registry-local for a port. Storage is an H2 file, so that a suite
 * that stops and restarts the registry (an outage) finds its schemas and ids again.
 */
export function schemaRegistryLocal(
  command: 'start' | 'stop' | 'status' | 'reset',
  port = TEST_SCHEMA_REGISTRY_PORT,
): { code: number; output: string } {
  const result = runBounded(SCRIPT, [command], { env: { ...process.env, ...registryEnv(port) } });
  return { code: result.status ?? 1, output: `${result.stdout}${result.stderr}`.trim() };
}

const registryEnv = (port: number) => ({
  SCHEMA_REGISTRY_LOCAL_PORT: String(port),
  SCHEMA_REGISTRY_LOCAL_MGMT_PORT: String(port + 10),
  SCHEMA_REGISTRY_LOCAL_STORAGE: 'file',
});

/** The Confluent-compatible API base, what clients take as the registry's URL. */
export function schemaRegistryUrl(port = TEST_SCHEMA_REGISTRY_PORT): string {
  return `http://127.0.0.1:${port}/apis/ccompat/v7`;
}

/**
 * Starts the local registry for a suite unless it already runs, and stops it after the
 * suite only if a suite started it and no other suite still uses it.
 */
export function schemaRegistrySuite(port = TEST_SCHEMA_REGISTRY_PORT): { readonly url: string } {
  leasedLocalServer({
    work: path.join(
      process.env.SCHEMA_REGISTRY_LOCAL_HOME ?? path.join(DEPLOY, '.cache'),
      `registry-${port}`,
    ),
    label: `the local Schema Registry on port ${port}`,
    run: (command) => schemaRegistryLocal(command, port),
    stopCommand: { script: SCRIPT, env: registryEnv(port) },
  });
  return { url: schemaRegistryUrl(port) };
}
