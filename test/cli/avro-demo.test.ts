import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { testBrokers } from '../support/kafka';
import { tempDir } from '../support/rows';
import { runBounded } from '../support/run-bounded';
import { DEMO_SCHEMA_REGISTRY_PORT, schemaRegistryLocal } from '../support/schema-registry-local';

const BIN = path.resolve(__dirname, '../../bin/kafka-lance');

test('demo --format avro: starts the local registry when none is configured, produces with the standard serializer, evolves the schema half-way, and the summary shows the new column and the exactly-once check', async () => {
  const dir = await tempDir('kl-avro-demo');
  const wasRunning = schemaRegistryLocal('status', DEMO_SCHEMA_REGISTRY_PORT).code === 0;
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    KAFKA_BOOTSTRAP_SERVERS: testBrokers().join(','),
    SCHEMA_REGISTRY_LOCAL_PORT: String(DEMO_SCHEMA_REGISTRY_PORT),
    SCHEMA_REGISTRY_LOCAL_MGMT_PORT: String(DEMO_SCHEMA_REGISTRY_PORT + 10),
  };
  delete env.SCHEMA_REGISTRY_URL;
  const out = runBounded(
    process.execPath,
    [BIN, 'demo', '--format', 'avro', '--seconds', '4', '--rate', '500', '--data-dir', dir],
    { env, timeoutMs: 300_000 },
  );
  expect(out.stderr).toBe('');
  expect(out.status).toBe(0);
  // No JSON log line reaches the terminal.
  expect(out.stdout.split('\n').filter((l) => l.trim().startsWith('{'))).toEqual([]);
  if (!wasRunning) {
    expect(out.stdout).toMatch(/^No SCHEMA_REGISTRY_URL: starting the local Schema Registry/m);
    expect(out.stdout).toMatch(/^Stopped the local Schema Registry\.$/m);
    expect(schemaRegistryLocal('status', DEMO_SCHEMA_REGISTRY_PORT).code).not.toBe(0);
  }
  // 2,000 records, 10 broken on purpose (one in 200): every other one is a row, exactly once.
  expect(out.stdout).toMatch(/^Produced +2000 log lines to app-logs-avro \(10 broken on purpose\)$/m);
  expect(out.stdout).toMatch(/^Check +1990 published = 2000 produced - 10 dead letters: yes$/m);
  expect(out.stdout).toMatch(/^Duplicates +0 rows/m);
  expect(out.stdout).toMatch(/^Schema +version 1 \(registry id \d+\) from record 0$/m);
  expect(out.stdout).toMatch(/^Schema +version 2 \(registry id \d+\) from record 1000: adds "release"$/m);
  // Records 1000-1999 are version 2; 5 of them are broken on purpose.
  expect(out.stdout).toMatch(
    /^New column +release \(Utf8, nullable\): 995 rows of this run hold a value = 995 records of version 2: yes$/m,
  );
  await fsp.rm(dir, { recursive: true, force: true });
}, 320_000);
