import * as net from 'node:net';
import { kafkaLocal } from '../support/kafka-local';

/** The project's broker script on a port of its own (the suite's broker keeps running). */
const PORT = Number(process.env.KAFKA_TEST_SCRIPT_PORT ?? 19192);

test('the local broker stops and starts twice in a row; start is a no-op when it already runs', () => {
  for (let round = 0; round < 2; round++) {
    const started = kafkaLocal('start', PORT);
    expect([started.code, started.output]).toEqual([0, expect.stringContaining(`up on 127.0.0.1:${PORT}`)]);
    expect(kafkaLocal('start', PORT).output).toContain('already running');
    expect(kafkaLocal('status', PORT).code).toBe(0);
    const stopped = kafkaLocal('stop', PORT);
    expect([stopped.code, stopped.output]).toEqual([0, expect.stringContaining('stopped')]);
    expect(kafkaLocal('status', PORT).code).toBe(3);
  }
});

test('start fails with a clear message when another process holds the port', async () => {
  const squatter = net.createServer();
  await new Promise<void>((resolve) => squatter.listen(PORT, '127.0.0.1', resolve));
  try {
    const started = kafkaLocal('start', PORT);
    expect(started.code).not.toBe(0);
    expect(started.output).toContain(`127.0.0.1:${PORT} is already in use by another process`);
  } finally {
    await new Promise((resolve) => squatter.close(resolve));
  }
});
