import { Writable } from 'node:stream';
import { createLogger } from '../../src/common/logger';
import { redactedClient, registerSecrets, withoutUserInfo } from '../../src/common/redaction';

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
  for (const secret of ['hunter2', 'PRIVATE-KEY', 'AKIA-SECRET']) expect(text).not.toContain(secret);
  expect(text).toContain('[redacted]');
});

test('every field of the client sections is redacted by structure, and a URL loses its user info', () => {
  const shown = redactedClient({
    clientId: 'c',
    ssl: { ca: 'CA', passphrase: 'pp', pfx: Buffer.from('x'), rejectUnauthorized: false },
    sasl: { mechanism: 'aws', sessionToken: 'tok', accessKeyId: 'id', secretAccessKey: 'sk' },
  });
  expect(shown).toEqual({
    clientId: 'c',
    ssl: { ca: '[redacted]', passphrase: '[redacted]', pfx: '[redacted]', rejectUnauthorized: false },
    sasl: {
      mechanism: 'aws',
      sessionToken: '[redacted]',
      accessKeyId: '[redacted]',
      secretAccessKey: '[redacted]',
    },
  });
  expect(withoutUserInfo('https://user:p%40ss@registry:8081/apis')).toBe(
    'https://[redacted]@registry:8081/apis',
  );
  expect(withoutUserInfo('http://registry:8081')).toBe('http://registry:8081');
});

test('a registered secret is scrubbed from any line, also JSON-escaped inside an error text', () => {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(chunk.toString());
      done();
    },
  });
  registerSecrets(['multi\nline "quoted" secret-value']);
  const logger = createLogger({ level: 'info' }, sink);
  logger.error({ err: new Error('library said: multi\nline "quoted" secret-value') }, 'failed');
  const text = lines.join('');
  expect(text).toContain('library said: [redacted]');
  expect(text).not.toContain('secret-value');
});
