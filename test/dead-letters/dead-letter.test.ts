import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { KafkaJSConnectionError, KafkaJSNumberOfRetriesExceeded, KafkaJSProtocolError } from 'kafkajs';
import { DeadLetterWriteError } from '../../src/common/errors';
import { FileDeadLetterSink, type DeadLetter } from '../../src/dead-letters/dead-letter';
import { classifyProduceError } from '../../src/kafka/protocol/dead-letter-topic';
import { tempDir } from '../support/rows';

const protocolError = (type: string, retriable: boolean) =>
  new KafkaJSProtocolError(Object.assign(new Error(`broker says ${type}`), { type, code: 0, retriable }));
const retriesExceeded = (cause: Error) =>
  new KafkaJSNumberOfRetriesExceeded(cause, { retryCount: 5, retryTime: 1_000 });

const letter = (offset: number): DeadLetter => ({
  topic: 't',
  partition: 0,
  offset,
  timestamp: '1700000000000',
  reason: 'invalid-json',
  detail: 'Unexpected end of JSON input',
  key: null,
  value: Buffer.from('{"a":'),
  headers: undefined,
});

describe('dead-letter sinks classify their failures', () => {
  test('a record larger than the topic accepts is not retriable', () => {
    const e = classifyProduceError('topic dlq', 'dlq', protocolError('MESSAGE_TOO_LARGE', false));
    expect(e).toBeInstanceOf(DeadLetterWriteError);
    expect(e.retriable).toBe(false);
    expect(e.message).toContain('MESSAGE_TOO_LARGE');
  });

  test('a missing topic, after kafkajs gave up retrying it, is not retriable and says so', () => {
    const e = classifyProduceError(
      'topic dlq',
      'dlq',
      retriesExceeded(protocolError('UNKNOWN_TOPIC_OR_PARTITION', true)),
    );
    expect(e.retriable).toBe(false);
    expect(e.message).toContain('the topic dlq does not exist');
  });

  test('a broker out of reach, after kafkajs gave up retrying, stays retriable', () => {
    const e = classifyProduceError(
      'topic dlq',
      'dlq',
      retriesExceeded(new KafkaJSConnectionError('Connection error: ECONNREFUSED')),
    );
    expect(e.retriable).toBe(true);
  });

  test('a file sink whose path cannot be a file fails as not retriable', async () => {
    const dir = await tempDir('kl-dlq-sink');
    await fsp.writeFile(path.join(dir, 'plain'), 'x');
    const sink = new FileDeadLetterSink(path.join(dir, 'plain', 'dlq.jsonl'));
    const failure = await sink.write([letter(1)]).catch((e: unknown) => e);
    expect(failure).toBeInstanceOf(DeadLetterWriteError);
    expect((failure as DeadLetterWriteError).retriable).toBe(false);
  });

  test('a file sink ends a torn last line (a failed or crashed append) before appending', async () => {
    const file = path.join(await tempDir('kl-dlq-sink'), 'dlq.jsonl');
    await fsp.writeFile(file, '{"topic":"t","offs');
    const sink = new FileDeadLetterSink(file);
    await sink.write([letter(1), letter(2)]);
    await sink.close();
    const lines = (await fsp.readFile(file, 'utf8')).split('\n');
    expect(lines[0]).toBe('{"topic":"t","offs');
    expect(lines.slice(1, 3).map((l) => (JSON.parse(l) as { offset: number }).offset)).toEqual([1, 2]);
    expect(lines[3]).toBe('');
  });

  test('a file sink keeps each letter one line when writes of two partitions overlap, however large', async () => {
    // Node writes a FileHandle's appendFile in 512 KiB chunks: two appends under way at once
    // interleaved their chunks, and a dead letter of a few hundred KiB became two broken lines.
    const file = path.join(await tempDir('kl-dlq-sink'), 'dlq.jsonl');
    const sink = new FileDeadLetterSink(file);
    const large = (partition: number, offset: number): DeadLetter => ({
      ...letter(offset),
      partition,
      value: Buffer.alloc(600 * 1024, 0x61 + partition),
    });
    await Promise.all([0, 1, 2, 3].map((p) => sink.write([large(p, 1), large(p, 2)])));
    await sink.close();
    const lines = (await fsp.readFile(file, 'utf8')).split('\n').filter((l) => l !== '');
    const read = lines.map((l) => JSON.parse(l) as { partition: number; offset: number; value: string });
    expect(read.map((l) => `${l.partition}/${l.offset}`).sort()).toEqual([
      '0/1',
      '0/2',
      '1/1',
      '1/2',
      '2/1',
      '2/2',
      '3/1',
      '3/2',
    ]);
    for (const l of read)
      expect(Buffer.from(l.value, 'base64').equals(large(l.partition, 0).value!)).toBe(true);
  });
});
