import { isUtf8 } from 'node:buffer';
import * as protobuf from 'protobufjs';
import { errorMessage } from '../../common/errors';
import { HEADER_BYTES, messageIndexesOf } from '../../schema-registry/wire-format';
import type { CompiledReader } from '../compiled-reader';
import type { RegistryPayloadFormat, RegistryRow, RegistryVerdict } from '../registry-writer-schemas';
import { compileProtobufReader, NotCompiled } from './compiled-reader';
import { InexactProtobufValue, protobufColumns, type ProtobufColumns } from './protobuf-mapping';
import { loadProtobufSchema } from './protobuf-schema-files';

/** One .proto file from the registry, its message types mapped on first use. */
interface ParsedProto {
  /** The file's top-level message types in declaration order (what the first message index counts). */
  readonly topLevel: readonly protobuf.Type[];
  /** By message-index path ("0", "1.0"): the type and its columns, or why it has none. */
  readonly byPath: Map<string, MappedMessage | { unsupported: string }>;
}

interface MappedMessage {
  readonly type: protobuf.Type;
  readonly columns: ProtobufColumns;
  /** Its compiled reader once asked for (null: the type is left to `decode`). */
  compiled?: { readonly reader: CompiledReader; readonly message: string } | null;
}

/** The compiled reader of a message type, or null where it does not cover the type. */
function compiledOf(message: MappedMessage, path: string): CompiledReader | null {
  if (process.env.KAFKA_LANCE_COMPILED_PROTOBUF === 'off') return null;
  try {
    return compileProtobufReader(message.type, path, message.columns.fields);
  } catch (error) {
    if (error instanceof NotCompiled) return null;
    throw error;
  }
}

/**
 * Protobuf in the Confluent wire format: the 5-byte header, the message-index list
 * (wire-format.ts), then the message's binary encoding. The registry holds the file
 * (schemaType PROTOBUF) as .proto text or as a base64 FileDescriptorProto, with the files
 * it imports as schema references (protobuf-schema-files.ts).
 */
export const PROTOBUF_PAYLOADS: RegistryPayloadFormat<ParsedProto> = {
  format: 'protobuf',
  schemaType: 'PROTOBUF',
  parse(schema, references) {
    return { topLevel: loadProtobufSchema(schema, references), byPath: new Map() };
  },
  decode(parsed, value) {
    const framing = messageIndexesOf(value);
    if ('invalid' in framing) return { reason: 'invalid-message-index', detail: framing.invalid };
    const path = framing.indexes.join('.');
    let message = parsed.byPath.get(path);
    if (!message) {
      const type = typeAt(parsed.topLevel, framing.indexes);
      if (typeof type === 'string') return { reason: 'invalid-message-index', detail: type };
      try {
        message = { type, columns: protobufColumns(type) };
      } catch (error) {
        message = { unsupported: `message ${type.fullName.slice(1)}: ${errorMessage(error)}` };
      }
      parsed.byPath.set(path, message);
    }
    if ('unsupported' in message) return { reason: 'unsupported-schema', detail: message.unsupported };
    const decoded = decodeMessage(message.type, message.columns, value.subarray(framing.payloadOffset));
    return 'reason' in decoded ? decoded : { ...decoded, message: path };
  },
  compiled(parsed, value) {
    // The list [0] (the file's first message type) is one byte 0: what most values carry.
    let path = '0';
    if (value.byteLength <= HEADER_BYTES || value[HEADER_BYTES] !== 0) {
      const framing = messageIndexesOf(value);
      if ('invalid' in framing) return undefined;
      path = framing.indexes.join('.');
    }
    // A type is mapped by `decode`, on the first record of it (which admits its columns).
    const message = parsed.byPath.get(path);
    if (!message || 'unsupported' in message) return undefined;
    if (message.compiled === undefined) {
      const reader = compiledOf(message, path);
      message.compiled = reader && { reader, message: path };
    }
    return message.compiled ?? undefined;
  },
};

/**
 * protobufjs's Reader, with strings that must be UTF-8. Its own reading turns invalid bytes
 * into other text without a word (a string cut inside a character reads as another
 * character). Never its BufferReader either, which reads a string running past the end of
 * a truncated payload as the bytes there are: the Reader checks each length against the end.
 */
class StrictReader extends protobuf.Reader {
  override string(): string {
    const bytes = this.bytes();
    // isUtf8 and a Buffer's decoding cost a third of a fatal TextDecoder's on short strings.
    if (!isUtf8(bytes)) throw new Error(`a string field that is not valid UTF-8 (before byte ${this.pos})`);
    return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8');
  }
}

/** The message type a message-index path names, or why it names none. */
function typeAt(topLevel: readonly protobuf.Type[], indexes: readonly number[]): protobuf.Type | string {
  let candidates = topLevel;
  let where = 'the file';
  let type: protobuf.Type | undefined;
  for (const index of indexes) {
    type = candidates[index];
    if (!type)
      return `message index [${indexes.join(', ')}]: ${where} has ${candidates.length} message type(s) at that level, none at index ${index}`;
    where = `message ${type.fullName.slice(1)}`;
    candidates = type.nestedArray.filter((n): n is protobuf.Type => n instanceof protobuf.Type);
  }
  return type!;
}

function decodeMessage(
  type: protobuf.Type,
  columns: ProtobufColumns,
  payload: Uint8Array,
): Omit<RegistryRow, 'schemaId'> | RegistryVerdict {
  let message: protobuf.Message;
  try {
    message = type.decode(
      new StrictReader(new Uint8Array(payload.buffer, payload.byteOffset, payload.byteLength)),
    );
  } catch (error) {
    return {
      reason: 'undecodable-payload',
      detail: `the payload is not a ${type.fullName.slice(1)} message: ${errorMessage(error)}`,
    };
  }
  try {
    return { row: columns.toRow(message), fields: columns.fields };
  } catch (error) {
    if (error instanceof InexactProtobufValue)
      return { reason: 'undecodable-payload', detail: error.message };
    throw error;
  }
}
