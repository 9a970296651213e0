import { Writable } from 'node:stream';
import { createLogger } from '../../src/common/logger';

test('secrets in logged client options never reach a log line', () => {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(chunk.toString());
      done();
    },
  });
  const logger = createLogger({ level: 'info' }, sink);
  logger.info(
    {
      client: {
        sasl: { mechanism: 'plain', username: 'svc', password: 'hunter2' },
        ssl: { key: 'PRIVATE-KEY', ca: 'ok' },
      },
      lance: { storageOptions: { aws_secret_access_key: 'AKIA-SECRET' } },
    },
    'starting replica',
  );
  const text = lines.join('');
  expect(text).toContain('"username":"svc"');
  for (const secret of ['hunter2', 'PRIVATE-KEY', 'AKIA-SECRET']) expect(text).not.toContain(secret);
  expect(text).toContain('[redacted]');
});
