import * as net from 'node:net';
import * as lancedb from '@lancedb/lancedb';
import { TEST_S3_PORT, s3DatabaseUri, s3Local, s3LocalSuite } from '../support/s3-local';

/** The project's S3 script on a port of its own (the suites' server keeps running). */
const PORT = Number(process.env.S3_TEST_SCRIPT_PORT ?? TEST_S3_PORT + 3);
const SECRET = process.env.S3_LOCAL_SECRET_ACCESS_KEY ?? 'kafka-lance-secret';

const s3 = s3LocalSuite();

test('the local S3 server stops and starts twice in a row; start is a no-op when it already runs', () => {
  for (let round = 0; round < 2; round++) {
    const started = s3Local('start', PORT);
    expect([started.code, started.output]).toEqual([
      0,
      expect.stringContaining(`up on http://127.0.0.1:${PORT}`),
    ]);
    expect(started.output).not.toContain(SECRET);
    expect(s3Local('start', PORT).output).toContain('already running');
    expect(s3Local('status', PORT).code).toBe(0);
    const stopped = s3Local('stop', PORT);
    expect([stopped.code, stopped.output]).toEqual([0, expect.stringContaining('stopped')]);
    expect(s3Local('status', PORT).code).toBe(3);
  }
});

test('start fails with a clear message when another process holds the port', async () => {
  const squatter = net.createServer();
  await new Promise<void>((resolve) => squatter.listen(PORT, '127.0.0.1', resolve));
  try {
    const started = s3Local('start', PORT);
    expect(started.code).not.toBe(0);
    expect(started.output).toContain(`127.0.0.1:${PORT} is already in use by another process`);
  } finally {
    await new Promise((resolve) => squatter.close(resolve));
  }
});

test('the bucket exists: LanceDB creates, appends to and counts a table in it', async () => {
  const db = await lancedb.connect(s3DatabaseUri(), { storageOptions: s3.storageOptions });
  try {
    const table = await db.createTable('t', [{ n: 1, text: 'one' }]);
    await table.add([
      { n: 2, text: 'two' },
      { n: 3, text: 'three' },
    ]);
    expect(await table.countRows()).toBe(3);
    expect(await db.tableNames()).toEqual(['t']);
    table.close();
    await db.dropTable('t');
    expect(await db.tableNames()).toEqual([]);
  } finally {
    db.close();
  }
});
