/**
 * Kafka's Metadata API at versions 10-12, the first that answer a topic's id (KIP-516,
 * Kafka 2.8+): just enough of it to learn the ids of named topics. kafkajs 2.2.4 speaks
 * Metadata up to v6 and has no encoder for the flexible versions (KIP-482: compact
 * strings and arrays, tagged fields), so the request body and the response are coded
 * here and sent over a kafkajs broker connection (topic-ids.ts).
 *
 * Headers: a flexible request needs request header v2, which is kafkajs's header v1
 * (api key, version, correlation id, client id) followed by an empty tagged-field
 * section; the body coded here therefore starts with that one 0 byte. The response
 * header v1 is the correlation id (read by kafkajs) followed by a tagged-field section,
 * which the decoder skips first.
 */
export const METADATA_API_KEY = 3;
/** The oldest Metadata version that carries topic ids. */
export const MIN_TOPIC_ID_VERSION = 10;
/** The newest version coded here (v13, Kafka 4.0, adds a top-level error code). */
export const MAX_CODED_VERSION = 12;

/** Kafka's error code for a topic the broker does not know. */
export const UNKNOWN_TOPIC_OR_PARTITION = 3;

export interface TopicMetadata {
  /** null only at v12+, for a topic asked for by id (never here). */
  readonly name: string | null;
  readonly errorCode: number;
  /** Kafka's text form of the id (URL-safe base64, no padding, as `kafka-topics --describe` prints it); undefined when the broker sent the zero id. */
  readonly topicId: string | undefined;
  readonly partitions: number;
}

/** A Metadata response that does not parse: the broker speaks another version than asked. */
export class MetadataDecodeError extends Error {
  constructor(detail: string) {
    super(`cannot decode a Metadata response: ${detail}`);
    this.name = 'MetadataDecodeError';
  }
}

/** The version to ask a broker for, or undefined when it has no topic ids (before Kafka 2.8). */
export function metadataVersionFor(brokerMax: number | undefined): number | undefined {
  if (brokerMax === undefined || brokerMax < MIN_TOPIC_ID_VERSION) return undefined;
  return Math.min(brokerMax, MAX_CODED_VERSION);
}

/** The request body, preceded by request header v2's empty tagged fields (see above). */
export function encodeMetadataRequest(version: number, topics: readonly string[]): Buffer {
  checkVersion(version);
  const w = new Writer();
  w.uvarint(0); // request header v2: no tagged fields
  w.uvarint(topics.length + 1);
  for (const name of topics) {
    w.bytes(Buffer.alloc(16)); // topic_id: zero, the topic is named
    w.compactString(name);
    w.uvarint(0);
  }
  w.int8(0); // allow_auto_topic_creation: never create a topic by asking for its id
  if (version <= 10) w.int8(0); // include_cluster_authorized_operations (v8-v10)
  w.int8(0); // include_topic_authorized_operations
  w.uvarint(0);
  return w.finish();
}

/** Decodes what follows the correlation id of a Metadata response (response header v1's tagged fields first). */
export function decodeMetadataResponse(version: number, payload: Buffer): TopicMetadata[] {
  checkVersion(version);
  const r = new Reader(payload);
  try {
    r.taggedFields(); // response header v1
    r.int32(); // throttle_time_ms
    r.array(() => {
      r.int32(); // node_id
      r.compactString(); // host
      r.int32(); // port
      r.compactString(); // rack
      r.taggedFields();
    });
    r.compactString(); // cluster_id
    r.int32(); // controller_id
    const topics = r.array((): TopicMetadata => {
      const errorCode = r.int16();
      const name = r.compactString();
      const id = r.bytes(16);
      r.int8(); // is_internal
      const partitions = r.array(() => {
        r.int16(); // error_code
        r.int32(); // partition_index
        r.int32(); // leader_id
        r.int32(); // leader_epoch
        for (let i = 0; i < 3; i++) r.array(() => r.int32()); // replica, isr, offline nodes
        r.taggedFields();
      }).length;
      r.int32(); // topic_authorized_operations
      r.taggedFields();
      return { name, errorCode, topicId: uuidText(id), partitions };
    });
    if (version <= 10) r.int32(); // cluster_authorized_operations (v8-v10)
    r.taggedFields();
    if (!r.done()) throw new MetadataDecodeError(`${r.remaining()} bytes left after the response`);
    return topics;
  } catch (error) {
    if (error instanceof MetadataDecodeError) throw error;
    throw new MetadataDecodeError(error instanceof Error ? error.message : String(error));
  }
}

/** Kafka's Uuid.toString(): URL-safe base64 without padding; the zero id means none. */
export function uuidText(id: Buffer): string | undefined {
  return id.every((b) => b === 0) ? undefined : id.toString('base64url');
}

function checkVersion(version: number): void {
  if (!Number.isInteger(version) || version < MIN_TOPIC_ID_VERSION || version > MAX_CODED_VERSION)
    throw new RangeError(
      `Metadata v${version} is not coded here (v${MIN_TOPIC_ID_VERSION}-v${MAX_CODED_VERSION})`,
    );
}

class Writer {
  readonly #chunks: Buffer[] = [];

  int8(v: number): void {
    this.#chunks.push(Buffer.of(v & 0xff));
  }

  uvarint(v: number): void {
    const out: number[] = [];
    let rest = v >>> 0;
    while (rest >= 0x80) {
      out.push((rest & 0x7f) | 0x80);
      rest >>>= 7;
    }
    out.push(rest);
    this.#chunks.push(Buffer.from(out));
  }

  bytes(b: Buffer): void {
    this.#chunks.push(b);
  }

  compactString(s: string): void {
    const b = Buffer.from(s, 'utf8');
    this.uvarint(b.length + 1);
    this.#chunks.push(b);
  }

  finish(): Buffer {
    return Buffer.concat(this.#chunks);
  }
}

class Reader {
  #at = 0;
  constructor(private readonly buf: Buffer) {}

  #need(n: number): void {
    if (this.#at + n > this.buf.length)
      throw new MetadataDecodeError(`truncated at byte ${this.#at} (${n} more needed)`);
  }

  int8(): number {
    this.#need(1);
    return this.buf.readInt8(this.#at++);
  }

  int16(): number {
    this.#need(2);
    const v = this.buf.readInt16BE(this.#at);
    this.#at += 2;
    return v;
  }

  int32(): number {
    this.#need(4);
    const v = this.buf.readInt32BE(this.#at);
    this.#at += 4;
    return v;
  }

  uvarint(): number {
    let value = 0;
    for (let shift = 0; shift <= 28; shift += 7) {
      this.#need(1);
      const b = this.buf[this.#at++]!;
      value += (b & 0x7f) * 2 ** shift;
      if ((b & 0x80) === 0) return value;
    }
    throw new MetadataDecodeError(`unsigned varint longer than 5 bytes at byte ${this.#at}`);
  }

  bytes(n: number): Buffer {
    this.#need(n);
    const b = this.buf.subarray(this.#at, this.#at + n);
    this.#at += n;
    return b;
  }

  /** COMPACT_(NULLABLE_)STRING: length + 1, 0 for null. */
  compactString(): string | null {
    const n = this.uvarint();
    return n === 0 ? null : this.bytes(n - 1).toString('utf8');
  }

  /** COMPACT_ARRAY: length + 1, 0 for null (read as empty). */
  array<T>(item: () => T): T[] {
    const n = this.uvarint();
    const out: T[] = [];
    for (let i = 0; i < n - 1; i++) out.push(item());
    return out;
  }

  /** A tagged-field section: fields this code does not know are skipped, as KIP-482 intends. */
  taggedFields(): void {
    const count = this.uvarint();
    for (let i = 0; i < count; i++) {
      this.uvarint(); // tag
      this.bytes(this.uvarint());
    }
  }

  done(): boolean {
    return this.#at === this.buf.length;
  }

  remaining(): number {
    return this.buf.length - this.#at;
  }
}
