import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { TEST_BROKER_PORT } from '../support/kafka-local';
import { tempDir } from '../support/rows';
import { runBounded } from '../support/run-bounded';

const BIN = path.resolve(__dirname, '../../bin/kafka-lance');
const KAFKA_LOCAL = path.resolve(__dirname, '../../deploy/kafka-local/kafka-local');
const KAFKA_LOCAL_HOME =
  process.env.KAFKA_LOCAL_HOME ?? path.resolve(__dirname, '../../deploy/kafka-local/.cache');
/** A broker of its own, away from the suites' shared one and the qualification's (+2). */
const PORT = TEST_BROKER_PORT + 6;

/**
 * A newcomer's first command: the demo starts its embedded broker on fresh storage and
 * creates its topics at once. A broker that has just started still answers "not the
 * leader for that topic-partition" right after the topics are created; the demo must
 * wait that out, not stop. The broker jars are shared (fetching them is not the hazard);
 * the broker's storage and the demo's data directory are new.
 */
test('the demo passes on its first run, against an embedded broker it has just started on fresh storage', async () => {
  const home = await tempDir('kl-demo-cold-broker');
  const lib = (await fsp.readdir(KAFKA_LOCAL_HOME)).filter((f) => f.startsWith('lib-'));
  for (const dir of lib) await fsp.symlink(path.join(KAFKA_LOCAL_HOME, dir), path.join(home, dir));
  const dataDir = await tempDir('kl-demo-first-run');
  const env: NodeJS.ProcessEnv = { ...process.env, KAFKA_LOCAL_PORT: String(PORT), KAFKA_LOCAL_HOME: home };
  delete env.KAFKA_BOOTSTRAP_SERVERS;
  delete env.KAFKA_BROKERS;
  try {
    const out = runBounded(
      process.execPath,
      [BIN, 'demo', '--seconds', '3', '--rate', '1000', '--data-dir', dataDir],
      {
        env,
        timeoutMs: 300_000,
      },
    );
    expect(out.stderr).toBe('');
    expect(out.status).toBe(0);
    expect(out.stdout).toContain('starting the embedded Kafka broker');
    expect(out.stdout).toMatch(/^Produced +3000 log lines to app-logs/m);
    expect(out.stdout).toMatch(/^Duplicates +0 rows/m);
    expect(out.stdout).toContain('Stopped the embedded broker.');
  } finally {
    runBounded(KAFKA_LOCAL, ['stop'], { env }); // should the demo have left it running
    await fsp.rm(home, { recursive: true, force: true });
    await fsp.rm(dataDir, { recursive: true, force: true });
  }
}, 360_000);
