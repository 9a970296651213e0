import * as protobuf from 'protobufjs';
import * as descriptor from 'protobufjs/ext/descriptor';
import { errorMessage } from '../../common/errors';
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
 * protobufjs Type's nested messages in order; in a descriptor (and in the text Confluent's
 * Java serializer prints from one) those include the map-entry messages protoc generates,
 * as the serializers count them, kept as types while the map fields themselves become
 * protobufjs map fields, as `map<K, V>` in .proto text is.
 */
export function loadProtobufSchema(
  schema: string,
  references: readonly ReferencedSchema[],
): readonly protobuf.Type[] {
  // The schema's own file first, into the empty root: its top-level messages are then its own,
  // whatever package the other files share with it.
  const root = new protobuf.Root();
  const main = addFile(root, schema);
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
      try {
        pending.push(...addFile(root, reference.schema).imports);
      } catch (error) {
        throw new Error(`its reference "${name}": ${errorMessage(error)}`, { cause: error });
      }
    } else if (WELL_KNOWN.has(name)) {
      root.addJSON(protobuf.common.get(name)?.nested ?? {});
    } else {
      throw new Error(
        `it imports "${name}", which is neither among its schema references nor one of Google's well-known types`,
      );
    }
  }
  entriesAsMapFields(root);
  root.resolveAll();
  if (main.topLevel.length === 0) throw new Error('the file defines no message');
  return main.topLevel;
}

interface AddedFile {
  readonly imports: readonly string[];
  /** The messages of the file's package after adding it: the file's own when the root was empty. */
  readonly topLevel: readonly protobuf.Type[];
}

/** Serialized descriptors are base64; .proto text always has a character base64 lacks (a space, `;`, `{`). */
const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;

function addFile(root: protobuf.Root, schema: string): AddedFile {
  const text = schema.trim();
  return BASE64.test(text) ? addDescriptor(root, Buffer.from(text, 'base64')) : addText(root, text);
}

function addText(root: protobuf.Root, text: string): AddedFile {
  const parsed = protobuf.parse(text, root, { keepCase: true });
  const container = parsed.package ? root.lookup(parsed.package) : root;
  const topLevel =
    container instanceof protobuf.Namespace
      ? container.nestedArray.filter((n): n is protobuf.Type => n instanceof protobuf.Type)
      : [];
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
    clearMisplacedMapEntries(type, m);
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

/** protobufjs marks a descriptor's message that holds a map field as a map entry too: only the entry is. */
function clearMisplacedMapEntries(type: protobuf.Type, message: descriptor.IDescriptorProto): void {
  if (type.options?.map_entry && !message.options?.mapEntry) delete type.options.map_entry;
  for (const n of message.nestedType ?? []) {
    const child = type.get(n.name ?? '');
    if (child instanceof protobuf.Type) clearMisplacedMapEntries(child, n);
  }
}

/**
 * A map field as a descriptor has it, and as Confluent's Java serializer prints a descriptor
 * into the .proto text it registers: a repeated field of a nested entry message with
 * `option map_entry = true`. The .proto text's `map<K, V>` is a protobufjs map field; these
 * become one too, so that every form maps to the same columns. The entry messages stay:
 * they count among the nested messages of a message-index path, as the serializers count
 * them (in the field's place in a descriptor, as protoc puts them).
 */
function entriesAsMapFields(namespace: protobuf.Namespace): void {
  for (const nested of namespace.nestedArray)
    if (nested instanceof protobuf.Namespace) entriesAsMapFields(nested);
  if (!(namespace instanceof protobuf.Type)) return;
  const type = namespace;
  for (const field of [...type.fieldsArray]) {
    if (!field.repeated || field instanceof protobuf.MapField) continue;
    const entry = type.lookup(field.type);
    if (!(entry instanceof protobuf.Type) || entry.parent !== type || !entry.options?.map_entry) continue;
    const key = entry.fieldsById[1];
    const value = entry.fieldsById[2];
    if (!key || !value)
      throw new Error(`map field ${type.fullName.slice(1)}.${field.name}: its entry has no key or value`);
    const order = Object.keys(type.fields);
    type.remove(field);
    type.add(new protobuf.MapField(field.name, field.id, key.type, value.type, field.options));
    // Back in its place among the fields (add appends): the columns keep the file's order.
    const fields = { ...type.fields };
    for (const name of order) delete type.fields[name];
    for (const name of order) type.fields[name] = fields[name]!;
  }
}
