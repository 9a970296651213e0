import * as protobuf from 'protobufjs';
import * as descriptor from 'protobufjs/ext/descriptor';
import type { ReferencedSchema } from '../../schema-registry/wire-format';

/** Files a registry's schema may import without a schema reference: protobufjs carries them. */
const WELL_KNOWN = new Set(Object.keys(protobuf.common).filter((k) => k.endsWith('.proto')));

/** protobufjs/ext/descriptor adds these to the classes; its typings do not declare them. */
type FromDescriptor<T> = (
  d: descriptor.IDescriptorProto | descriptor.IEnumDescriptorProto,
  edition: string,
) => T;
const typeFromDescriptor = (protobuf.Type as unknown as { fromDescriptor: FromDescriptor<protobuf.Type> })
  .fromDescriptor;
const enumFromDescriptor = (protobuf.Enum as unknown as { fromDescriptor: FromDescriptor<protobuf.Enum> })
  .fromDescriptor;

/** FieldDescriptorProto.Type's numbers → protobufjs's scalar names (11 message, 14 enum: by type name). */
const SCALAR_TYPES: Readonly<Record<number, string>> = {
  1: 'double',
  2: 'float',
  3: 'int64',
  4: 'uint64',
  5: 'int32',
  6: 'fixed64',
  7: 'fixed32',
  8: 'bool',
  9: 'string',
  12: 'bytes',
  13: 'uint32',
  15: 'sfixed32',
  16: 'sfixed64',
  17: 'sint32',
  18: 'sint64',
};

/** A FileDescriptorProto as protobufjs decodes it (the fields this module reads). */
interface FileDescriptor {
  readonly name?: string;
  readonly package?: string;
  readonly dependency?: readonly string[];
  readonly messageType?: readonly descriptor.IDescriptorProto[];
  readonly enumType?: readonly descriptor.IEnumDescriptorProto[];
  readonly syntax?: string;
  readonly edition?: number;
}

/**
 * A registry's Protobuf schema, in either form a serializer registers it: the .proto text
 * (Confluent's Java serializer, and what Confluent's registry returns by default), or a
 * base64 serialized FileDescriptorProto (Confluent's Python and Go serializers, which
 * Confluent's registry accepts and Apicurio keeps as it was given). Its imports resolve to
 * its schema references (each again in either form) or to Google's well-known types.
 *
 * Returns the file's top-level message types in declaration order: what the first index
 * of a message-index path counts. The nested types each further index counts are the
 * protobufjs Type's nested messages in order; in a descriptor those include the map-entry
 * messages protoc generates (as Confluent's serializers count them), kept as types while
 * the map fields themselves become protobufjs map fields, as the text form has them.
 */
export function loadProtobufSchema(
  schema: string,
  references: readonly ReferencedSchema[],
): readonly protobuf.Type[] {
  const root = new protobuf.Root();
  const main = addFile(root, schema, 'the schema');
  const byName = new Map(references.map((r) => [r.name, r]));
  const loaded = new Set<string>();
  const pending = [...main.imports];
  for (let name = pending.shift(); name !== undefined; name = pending.shift()) {
    if (loaded.has(name)) continue;
    loaded.add(name);
    const reference = byName.get(name);
    if (reference) {
      if ('missing' in reference)
        throw new Error(`its reference "${name}" is not in the registry: ${reference.missing}`);
      pending.push(...addFile(root, reference.schema, `its reference "${name}"`).imports);
    } else if (WELL_KNOWN.has(name)) {
      root.addJSON(protobuf.common.get(name)?.nested ?? {});
    } else {
      throw new Error(
        `it imports "${name}", which is neither among its schema references nor one of Google's well-known types`,
      );
    }
  }
  root.resolveAll();
  if (main.topLevel.length === 0) throw new Error('the file defines no message');
  return main.topLevel;
}

interface AddedFile {
  readonly imports: readonly string[];
  readonly topLevel: readonly protobuf.Type[];
}

/** Serialized descriptors are base64; .proto text always has a character base64 lacks (a space, `;`, `{`). */
const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;

function addFile(root: protobuf.Root, schema: string, what: string): AddedFile {
  const text = schema.trim();
  try {
    return BASE64.test(text) ? addDescriptor(root, Buffer.from(text, 'base64')) : addText(root, text);
  } catch (error) {
    if (what === 'the schema') throw error;
    throw new Error(`${what}: ${(error as Error).message}`, { cause: error });
  }
}

function addText(root: protobuf.Root, text: string): AddedFile {
  // A scratch root first: its top-level messages are this file's alone, whatever package
  // the other files share with it.
  const own = protobuf.parse(text, new protobuf.Root(), { keepCase: true });
  const topLevelNames = messagesOf(own.package ? own.root.lookup(own.package) : own.root).map((t) => t.name);
  const parsed = protobuf.parse(text, root, { keepCase: true });
  const container = parsed.package ? root.lookup(parsed.package) : root;
  const topLevel = topLevelNames.map((n) => (container as protobuf.Namespace).get(n) as protobuf.Type);
  return { imports: [...(parsed.imports ?? []), ...(parsed.weakImports ?? [])], topLevel };
}

function addDescriptor(root: protobuf.Root, bytes: Buffer): AddedFile {
  const file = descriptor.FileDescriptorProto.decode(bytes) as unknown as FileDescriptor;
  const edition = editionOf(file);
  const container = file.package ? root.define(file.package) : root;
  const topLevel: protobuf.Type[] = [];
  for (const m of file.messageType ?? []) {
    const type = typeFromDescriptor(m, edition);
    container.add(type);
    asMapFields(type, m);
    topLevel.push(type);
  }
  for (const e of file.enumType ?? []) container.add(enumFromDescriptor(e, edition));
  return { imports: [...(file.dependency ?? [])], topLevel };
}

/** protobufjs/ext/descriptor's own rule (editionFromDescriptor, which it does not export). */
function editionOf(file: FileDescriptor): string {
  if (file.syntax === 'editions') {
    if (file.edition === 1000) return '2023';
    throw new Error(`edition ${file.edition} is not supported`);
  }
  return file.syntax === 'proto3' ? 'proto3' : 'proto2';
}

/**
 * protobufjs reads a descriptor's map field as the repeated map-entry message it is on the
 * wire (and marks the enclosing message, not the entry, as a map entry). The .proto text
 * gives a map field: so does this, for the two forms to map to the same columns.
 */
function asMapFields(type: protobuf.Type, message: descriptor.IDescriptorProto): void {
  if (type.options?.map_entry && !message.options?.mapEntry) delete type.options.map_entry;
  const nested = message.nestedType ?? [];
  for (const n of nested) {
    const child = type.get(n.name ?? '');
    if (child instanceof protobuf.Type) asMapFields(child, n);
  }
  for (const f of message.field ?? []) {
    const entry = nested.find((n) => n.options?.mapEntry && `${type.fullName}.${n.name}` === f.typeName);
    if (!entry || f.label !== 3) continue;
    const key = entry.field?.find((x) => x.number === 1);
    const value = entry.field?.find((x) => x.number === 2);
    const keyType = SCALAR_TYPES[key?.type ?? 0];
    const valueType = value?.typeName || SCALAR_TYPES[value?.type ?? 0];
    if (!keyType || !valueType)
      throw new Error(`map field ${type.fullName.slice(1)}.${f.name}: no key or value type`);
    const order = Object.keys(type.fields);
    const old = type.fields[f.name ?? '']!;
    type.remove(old);
    type.add(new protobuf.MapField(old.name, old.id, keyType, valueType, old.options));
    // Back in its place among the fields (add appends): the columns keep the file's order.
    const fields = { ...type.fields };
    for (const name of order) delete type.fields[name];
    for (const name of order) type.fields[name] = fields[name]!;
  }
}

function messagesOf(container: protobuf.ReflectionObject | null): protobuf.Type[] {
  if (!(container instanceof protobuf.Namespace)) return [];
  return container.nestedArray.filter((n): n is protobuf.Type => n instanceof protobuf.Type);
}
