import { kafkaLocal } from './kafka-local';
import { lingeringServersDir, stopLingeringServers } from './leased-local-server';
import { runBounded } from './run-bounded';

export default async function globalTeardown(): Promise<void> {
  const lingering = lingeringServersDir();
  if (lingering !== undefined)
    for (const line of await stopLingeringServers(lingering, ({ script, env }) => {
      const out = runBounded(script, ['stop'], { env: { ...process.env, ...env } });
      return { code: out.status, output: `${out.stdout}${out.stderr}`.trim() };
    }))
      console.log(`jest: ${line}`);
  if (process.env.KAFKA_LANCE_TEST_BROKER_STARTED !== '1') return;
  const stopped = kafkaLocal('stop');
  console.log(`jest: ${stopped.output}`);
}
