import {
  MetadataDecodeError,
  decodeMetadataResponse,
  encodeMetadataRequest,
  metadataVersionFor,
  uuidText,
} from '../../../src/kafka/protocol/metadata-protocol';

/**
 * The Metadata v10-12 codec that learns topic ids (kafkajs 2.2.4 stops at v6). The
 * bytes below are written out by hand from Kafka's MetadataRequest.json /
 * MetadataResponse.json (flexible versions: compact strings and arrays, tagged fields),
 * independently of the codec's own writer, so a codec bug cannot hide in both.
 */
const uv = (n: number) => {
  const out: number[] = [];
  while (n >= 0x80) {
    out.push((n & 0x7f) | 0x80);
    n >>>= 7;
  }
  out.push(n);
  return out;
};
const str = (s: string) => [...uv(Buffer.byteLength(s) + 1), ...Buffer.from(s)];
const i16 = (n: number) => [(n >> 8) & 0xff, n & 0xff];
const i32 = (n: number) => [(n >>> 24) & 0xff, (n >>> 16) & 0xff, (n >>> 8) & 0xff, n & 0xff];
const ID_A = Buffer.from('0123456789abcdef0123456789abcdef', 'hex');
const ID_B = Buffer.from('fedcba9876543210fedcba9876543210', 'hex');

function partition(index: number): number[] {
  return [
    ...i16(0),
    ...i32(index),
    ...i32(1), // leader
    ...i32(0), // leader epoch
    ...uv(2),
    ...i32(1), // replicas [1]
    ...uv(2),
    ...i32(1), // isr [1]
    ...uv(1), // offline []
    0, // tagged
  ];
}

function topic(name: string, id: Buffer, errorCode: number, partitions: number): number[] {
  return [
    ...i16(errorCode),
    ...str(name),
    ...id,
    0, // is_internal
    ...uv(partitions + 1),
    ...Array.from({ length: partitions }, (_, p) => partition(p)).flat(),
    ...i32(-2147483648), // topic_authorized_operations
    0,
  ];
}

function response(version: number, topics: number[][], headerTags: number[] = [0]): Buffer {
  return Buffer.from([
    ...headerTags, // response header v1
    ...i32(0), // throttle
    ...uv(2), // one broker
    ...i32(1),
    ...str('127.0.0.1'),
    ...i32(9092),
    0, // rack: null
    0,
    ...str('cluster-x'),
    ...i32(1), // controller
    ...uv(topics.length + 1),
    ...topics.flat(),
    ...(version <= 10 ? i32(0) : []), // cluster_authorized_operations (v8-v10)
    0,
  ]);
}

describe('Metadata v10-12 codec (topic ids)', () => {
  test('a request is request header v2 tagged fields, then the named topics with zero ids, no auto-creation', () => {
    const body = encodeMetadataRequest(12, ['orders', 'é']);
    expect([...body]).toEqual([
      0, // request header v2 tagged fields
      ...uv(3),
      ...Buffer.alloc(16),
      ...str('orders'),
      0,
      ...Buffer.alloc(16),
      ...str('é'),
      0,
      0, // allow_auto_topic_creation
      0, // include_topic_authorized_operations
      0,
    ]);
    // v10 still has include_cluster_authorized_operations.
    expect(encodeMetadataRequest(10, []).length).toBe(encodeMetadataRequest(12, []).length + 1);
  });

  test.each([10, 11, 12])('v%i: a response gives each topic its id, error code and partition count', (v) => {
    const decoded = decodeMetadataResponse(
      v,
      response(v, [
        topic('orders', ID_A, 0, 2),
        topic('gone', Buffer.alloc(16), 3, 0),
        topic('b', ID_B, 0, 1),
      ]),
    );
    expect(decoded).toEqual([
      { name: 'orders', errorCode: 0, topicId: ID_A.toString('base64url'), partitions: 2 },
      { name: 'gone', errorCode: 3, topicId: undefined, partitions: 0 },
      { name: 'b', errorCode: 0, topicId: ID_B.toString('base64url'), partitions: 1 },
    ]);
  });

  test('unknown tagged fields in the response header are skipped', () => {
    // One tagged field: tag 5, three bytes.
    const decoded = decodeMetadataResponse(12, response(12, [topic('t', ID_A, 0, 1)], [1, 5, 3, 9, 9, 9]));
    expect(decoded.map((t) => t.topicId)).toEqual([ID_A.toString('base64url')]);
  });

  test('a truncated response or trailing bytes are a MetadataDecodeError, never a wrong id', () => {
    const whole = response(12, [topic('t', ID_A, 0, 1)]);
    expect(() => decodeMetadataResponse(12, whole.subarray(0, whole.length - 5))).toThrow(
      MetadataDecodeError,
    );
    expect(() => decodeMetadataResponse(12, Buffer.concat([whole, Buffer.of(0)]))).toThrow(
      MetadataDecodeError,
    );
    // v12 bytes read as v10 (one int32 more expected): refused.
    expect(() => decodeMetadataResponse(10, whole)).toThrow(MetadataDecodeError);
  });

  test('ids are printed as Kafka prints them (URL-safe base64, no padding); the zero id is none', () => {
    expect(uuidText(Buffer.from('fbff', 'hex').subarray(0, 2))).toBe('-_8');
    expect(uuidText(ID_A)).toHaveLength(22);
    expect(uuidText(Buffer.alloc(16))).toBeUndefined();
  });

  test('the version asked is the broker maximum up to 12; below 10 (Kafka < 2.8) there are no ids', () => {
    expect(metadataVersionFor(13)).toBe(12);
    expect(metadataVersionFor(12)).toBe(12);
    expect(metadataVersionFor(10)).toBe(10);
    expect(metadataVersionFor(9)).toBeUndefined();
    expect(metadataVersionFor(undefined)).toBeUndefined();
    expect(() => encodeMetadataRequest(9, [])).toThrow(RangeError);
  });
});
