import { execFileSync } from 'node:child_process';
import * as path from 'node:path';
import {
  decodeRecord,
  DROPPED_HEADERS,
  MAX_HEADERS_PER_RECORD,
} from '../../../src/kafka/protocol/record-batch';
import { zigzagVarint } from '../../support/varint';

/* eslint-disable @typescript-eslint/no-require-imports -- kafkajs 2.2.4 internals, the reference */
const Decoder = require('kafkajs/src/protocol/decoder') as new (buffer: Buffer) => unknown;
const encodeRecord = require('kafkajs/src/protocol/recordBatch/record/v0') as (record: {
  offsetDelta: number;
  timestampDelta: number;
  key: Buffer | null;
  value: Buffer | null;
  headers?: Record<string, string | string[]>;
}) => { buffer: Buffer };
const kafkajsDecodeRecord = require('kafkajs/src/protocol/recordBatch/record/v0/decoder') as (
  decoder: unknown,
  batchContext: unknown,
) => unknown;
const Long = require('kafkajs/src/utils/long') as { fromValue(v: bigint | string): unknown };
/* eslint-enable @typescript-eslint/no-require-imports */

/** One record's bytes as a record batch holds them, and a decoder over its body (what kafkajs passes). */
function bodyDecoder(record: Parameters<typeof encodeRecord>[0]): unknown {
  const framed = new Decoder(encodeRecord(record).buffer) as { readVarIntBytes(): Buffer };
  return new Decoder(framed.readVarIntBytes());
}

function context(firstOffset: string, firstTimestamp: string, logAppendTime = false) {
  return {
    firstOffset,
    firstTimestamp,
    maxTimestamp: '1796000009999',
    magicByte: 2,
    isControlBatch: false,
    timestampType: logAppendTime ? 1 : 0,
    lastOffsetDelta: 9,
    producerId: '-1',
    inTransaction: false,
  };
}

describe('decodeRecord gives what kafkajs 2.2.4 decodes', () => {
  const cases: [string, ReturnType<typeof context>, Parameters<typeof encodeRecord>[0]][] = [
    [
      'small offsets',
      context('0', '1796000000000'),
      { offsetDelta: 3, timestampDelta: 17, key: null, value: Buffer.from('{}') },
    ],
    [
      'no timestamp (-1)',
      context('42', '-1'),
      { offsetDelta: 0, timestampDelta: 0, key: Buffer.from('k'), value: null },
    ],
    [
      'a negative timestamp delta',
      context('42', '1796000000000'),
      { offsetDelta: 1, timestampDelta: -1234, key: null, value: Buffer.from('v') },
    ],
    [
      'a timestamp delta beyond 49 bits (a varlong of 8 bytes)',
      context('7', '0'),
      {
        offsetDelta: 1,
        timestampDelta: Long.fromValue(2n ** 52n + 3n) as number,
        key: null,
        value: null,
      },
    ],
    [
      'offsets beyond 2^53',
      context('9007199254740990', '1796000000000'),
      { offsetDelta: 9, timestampDelta: 5, key: null, value: Buffer.from('x') },
    ],
    [
      'the largest int64 offset',
      context('9223372036854775800', '1796000000000'),
      { offsetDelta: 7, timestampDelta: 5, key: null, value: Buffer.from('x') },
    ],
    [
      'a first timestamp beyond 2^53',
      context('0', '9007199254740993'),
      { offsetDelta: 0, timestampDelta: 2, key: null, value: Buffer.from('x') },
    ],
    [
      'log append time',
      context('5', '1796000000000', true),
      { offsetDelta: 2, timestampDelta: 3, key: null, value: Buffer.from('x') },
    ],
    [
      'headers and a repeated key',
      context('5', '1796000000000'),
      {
        offsetDelta: 2,
        timestampDelta: 3,
        key: null,
        value: Buffer.from('x'),
        headers: { a: 'x', b: ['y', 'z'] },
      },
    ],
  ];

  it.each(cases)('%s', (_name, batchContext, record) => {
    const ours = decodeRecord(bodyDecoder(record) as Parameters<typeof decodeRecord>[0], batchContext);
    const theirs = kafkajsDecodeRecord(bodyDecoder(record), batchContext);
    expect(ours).toEqual(theirs);
    expect(Object.getPrototypeOf((ours as { headers: object }).headers)).toBe(Object.prototype);
  });

  // Records without headers share one headers object: a header given to one through it
  // would appear on every other (a dead letter's headers are copied from it).
  it('gives records without headers one object nothing can add a header to', () => {
    const record = { offsetDelta: 0, timestampDelta: 0, key: null, value: Buffer.from('x') };
    const decoded = [0, 1].map(
      () =>
        decodeRecord(bodyDecoder(record) as Parameters<typeof decodeRecord>[0], context('0', '0')) as {
          headers: Record<string, unknown>;
        },
    );
    expect(decoded[0]!.headers).toEqual({});
    expect(() => {
      'use strict';
      decoded[0]!.headers.leaked = Buffer.from('x');
    }).toThrow(TypeError);
    expect(decoded[1]!.headers).toEqual({});
  });

  it('reads a 32-bit timestamp delta and large offsets as kafkajs does, record after record', () => {
    for (const delta of [0, 1, 63, 64, 8191, 8192, 2 ** 31 - 1, -(2 ** 31), 2 ** 40, -(2 ** 48)]) {
      const record = { offsetDelta: 2 ** 31 - 1, timestampDelta: delta, key: null, value: null };
      const batchContext = context('123456789012', '1796000000000');
      expect(decodeRecord(bodyDecoder(record) as Parameters<typeof decodeRecord>[0], batchContext)).toEqual(
        kafkajsDecodeRecord(bodyDecoder(record), batchContext),
      );
    }
  });
});

describe('a record with a flood of headers', () => {
  const headersOf = (headers: Record<string, string | string[]>) =>
    (
      decodeRecord(
        bodyDecoder({
          offsetDelta: 0,
          timestampDelta: 0,
          key: null,
          value: Buffer.from('x'),
          headers,
        }) as Parameters<typeof decodeRecord>[0],
        context('0', '1796000000000'),
      ) as { headers: Record<string, unknown>; value: Buffer }
    ).headers;

  it(`keeps the first ${MAX_HEADERS_PER_RECORD} of 20,000 distinct keys and says how many it dropped`, () => {
    const flood = Object.fromEntries(Array.from({ length: 20_000 }, (_, i) => [`k${i}`, 'v']));
    const headers = headersOf(flood);
    expect(Object.keys(headers)).toHaveLength(MAX_HEADERS_PER_RECORD + 1);
    expect(headers.k0).toEqual(Buffer.from('v'));
    expect(headers[`k${MAX_HEADERS_PER_RECORD - 1}`]).toEqual(Buffer.from('v'));
    expect(headers[`k${MAX_HEADERS_PER_RECORD}`]).toBeUndefined();
    expect(String(headers[DROPPED_HEADERS])).toBe(String(20_000 - MAX_HEADERS_PER_RECORD));
  });

  it('collects one key repeated beyond the cap up to the cap, in order', () => {
    const values = Array.from({ length: 3 * MAX_HEADERS_PER_RECORD }, (_, i) => String(i));
    const headers = headersOf({ k: values });
    expect((headers.k as Buffer[]).map(String)).toEqual(values.slice(0, MAX_HEADERS_PER_RECORD));
  });

  it("reads keys named like Object's own properties as headers, not as inherited values", () => {
    // kafkajs's fold reads these through the prototype: `constructor` became [Object, 'c'].
    const named = JSON.parse('{"__proto__": "p", "constructor": "c", "toString": ["t", "u"]}') as Record<
      string,
      string | string[]
    >;
    const headers = headersOf(named);
    expect(Object.getPrototypeOf(headers)).toBe(Object.prototype);
    expect(Object.getOwnPropertyDescriptor(headers, '__proto__')?.value).toEqual(Buffer.from('p'));
    expect(headers.constructor).toEqual(Buffer.from('c'));
    expect(headers.toString).toEqual([Buffer.from('t'), Buffer.from('u')]);
  });
});

/** A record's body: attributes, no time or offset delta, a null key, the value "x", then `rest`. */
const recordBody = (rest: number[]) =>
  Buffer.from([0, 0, 0, ...zigzagVarint(-1), ...zigzagVarint(1), 0x78, ...rest]);

describe('header counts beyond a record’s bytes', () => {
  // A producer that wrote a length it did not keep to (kafkajs 2.2.4 given a Uint8Array value)
  // leaves such records in compressed batches, which a broker accepts.
  it('a count past the record’s bytes gives the record kafkajs gives, not an error that stops its partition', () => {
    const body = recordBody(zigzagVarint(5_000));
    const ours = decodeRecord(new Decoder(body) as Parameters<typeof decodeRecord>[0], context('0', '0')) as {
      value: Buffer;
      offset: string;
    };
    const theirs = kafkajsDecodeRecord(new Decoder(body), context('0', '0')) as {
      value: Buffer;
      offset: string;
    };
    expect(ours.value).toEqual(theirs.value);
    expect(ours.offset).toBe(theirs.offset);
  });

  it('a count of 2^30 after a value length of -2^31 stops skipping at once', () => {
    // One header: an empty key, then a value of length -2^31 (kafkajs moved its decoder back by it).
    const body = recordBody([...zigzagVarint(2 ** 30), ...zigzagVarint(0), ...zigzagVarint(-(2 ** 31))]);
    const decoder = new Decoder(body) as Parameters<typeof decodeRecord>[0];
    const ours = decodeRecord(decoder, context('0', '0')) as {
      value: Buffer;
      headers: Record<string, unknown>;
    };
    expect(ours.value.toString()).toBe('x');
    // The skip past the cap stopped where it left the record's bytes: walking on through the
    // 2^30 headers would have taken seconds to minutes of the main thread.
    expect(ours.headers[DROPPED_HEADERS]).toEqual(Buffer.from(String(2 ** 30 - MAX_HEADERS_PER_RECORD)));
  });
});

describe('header lengths that would move the decoder back', () => {
  // A broker accepts a header value length below -1 (it reads null); kafkajs moved its decoder
  // back by it. A first header whose value length undoes its large key had every later key
  // read those bytes again: ~400 MB of strings for one record, out of heap for a few.
  it('a value length below -1 is null and takes no bytes: the headers cost at most the record’s bytes', () => {
    const key = Buffer.alloc(100_000, 0x61);
    const empty = [...zigzagVarint(0), ...zigzagVarint(-1)]; // an empty key, a null value
    const body = recordBody([
      ...zigzagVarint(MAX_HEADERS_PER_RECORD),
      ...zigzagVarint(key.length),
      ...key,
      ...zigzagVarint(-(key.length + 3)),
      ...Array.from({ length: MAX_HEADERS_PER_RECORD - 1 }, () => empty).flat(),
    ]);
    const decoder = new Decoder(body) as Parameters<typeof decodeRecord>[0];
    const ours = decodeRecord(decoder, context('0', '0')) as { headers: Record<string, unknown> };
    expect(ours.headers['a'.repeat(100_000)]).toBeNull();
    expect(ours.headers['']).toHaveLength(MAX_HEADERS_PER_RECORD - 1);
    const keyBytes = Object.keys(ours.headers).reduce((n, k) => n + k.length, 0);
    expect(keyBytes).toBeLessThanOrEqual(body.length);
    expect(decoder.offset).toBe(body.length);
  });

  it('a negative key length (a broker refuses one) reads as an empty key and takes no bytes', () => {
    const body = recordBody([...zigzagVarint(1), ...zigzagVarint(-5), ...zigzagVarint(1), 0x76]);
    const ours = decodeRecord(new Decoder(body) as Parameters<typeof decodeRecord>[0], context('0', '0')) as {
      headers: Record<string, unknown>;
    };
    expect(ours.headers).toEqual({ '': Buffer.from('v') });
  });
});

describe('installRecordDecoder', () => {
  // jest's module registry has no require.cache to patch: a plain node process, on the build.
  it("makes kafkajs's record batch decoder call decodeRecord, when installed before it loads", () => {
    const script = `
      const m = require(${JSON.stringify(path.resolve(__dirname, '../../../dist/src/kafka/protocol/record-batch.js'))});
      const installed = m.installRecordDecoder();
      const used = require('kafkajs/src/protocol/recordBatch/record/v0/decoder') === m.decodeRecord;
      require('kafkajs/src/protocol/recordBatch/v0/decoder');
      process.stdout.write(JSON.stringify({ installed, used, again: m.installRecordDecoder() }));
    `;
    const out = execFileSync(process.execPath, ['-e', script], { cwd: path.resolve(__dirname, '../../..') });
    expect(JSON.parse(out.toString())).toEqual({ installed: true, used: true, again: true });
  });

  // An import order that loads kafkajs's batch decoder first would quietly keep its slow one.
  it('is in place once the replica module is loaded, before any fetch', () => {
    const script = `
      require(${JSON.stringify(path.resolve(__dirname, '../../../dist/src/replica/replica.js'))});
      const f = require(${JSON.stringify(path.resolve(__dirname, '../../../dist/src/kafka/protocol/fetched-batch.js'))});
      const m = require(${JSON.stringify(path.resolve(__dirname, '../../../dist/src/kafka/protocol/record-batch.js'))});
      const used = require('kafkajs/src/protocol/recordBatch/record/v0/decoder') === m.decodeRecord;
      process.stdout.write(JSON.stringify({ installed: f.RECORD_DECODER_INSTALLED, used }));
    `;
    const out = execFileSync(process.execPath, ['-e', script], { cwd: path.resolve(__dirname, '../../..') });
    expect(JSON.parse(out.toString())).toEqual({ installed: true, used: true });
  });
});
