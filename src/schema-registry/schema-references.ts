import type { SchemaReference, SchemaRegistryClient } from './registry-client';
import type { ReferencedSchema } from './wire-format';

/** At most this many schemas are followed from one id's references, all levels together. */
export const MAX_REFERENCED_SCHEMAS = 100;

/**
 * The schemas an id's schema references, and theirs in turn (a Protobuf file's imports,
 * which Confluent's serializers register as subjects of their own), each name once. They
 * are fetched on the main thread with the id, so that a worker parses the whole set
 * without a network call. A reference the registry says it does not have is kept as
 * missing (the schema is unsupported, not the registry unreachable); an unreachable
 * registry rejects, as for the id itself.
 */
export async function referencedSchemas(
  client: Pick<SchemaRegistryClient, 'schemaByVersion'>,
  id: number,
  references: readonly SchemaReference[],
): Promise<ReferencedSchema[]> {
  const resolved: ReferencedSchema[] = [];
  const seen = new Set<string>();
  const queue = [...references];
  for (let next = queue.shift(); next; next = queue.shift()) {
    if (seen.has(next.name)) continue;
    seen.add(next.name);
    if (resolved.length === MAX_REFERENCED_SCHEMAS) {
      resolved.push({ name: next.name, missing: `more than ${MAX_REFERENCED_SCHEMAS} referenced schemas` });
      break;
    }
    const answer = await client.schemaByVersion(next.subject, next.version, id);
    if (!answer.found) {
      resolved.push({
        name: next.name,
        missing: `subject "${next.subject}" version ${next.version}: ${answer.message}`,
      });
      continue;
    }
    resolved.push({ name: next.name, schema: answer.schema });
    queue.push(...answer.references);
  }
  return resolved;
}
