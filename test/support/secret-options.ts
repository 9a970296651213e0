import type { z } from 'zod';
import { consumerDefinitionSchema } from '../../src/config';
import { secretSchemas } from '../../src/config/secret';

/** A secret-bearing option of the definition: its path, and the SASL mechanism whose branch holds it. */
export interface SecretOption {
  /** Dotted; `<name>` for any key of a record. */
  readonly path: string;
  readonly mechanism?: string;
}

interface Def {
  readonly type: string;
  readonly shape?: Readonly<Record<string, z.ZodType>>;
  readonly innerType?: z.ZodType;
  readonly options?: readonly z.ZodType[];
  readonly element?: z.ZodType;
  readonly valueType?: z.ZodType;
  readonly in?: z.ZodType;
  readonly out?: z.ZodType;
  readonly values?: readonly unknown[];
}

const defOf = (schema: z.ZodType): Def => (schema as unknown as { _zod: { def: Def } })._zod.def;

/**
 * Every secret-bearing option, read from the definition's zod schema (the schemas
 * secret.ts registers), so that a secret option added to the schema is found here
 * without a test naming it.
 */
export function secretOptions(schema: z.ZodType = consumerDefinitionSchema): SecretOption[] {
  const found = new Map<string, SecretOption>();
  // Field types nest themselves (a struct's fields are field types): each schema is walked
  // once per path from the root, never again inside itself.
  const onPath = new Set<z.ZodType>();
  const walk = (s: z.ZodType, path: readonly string[], mechanism: string | undefined): void => {
    if (onPath.has(s)) return;
    onPath.add(s);
    try {
      visit(s, path, mechanism);
    } finally {
      onPath.delete(s);
    }
  };
  const visit = (s: z.ZodType, path: readonly string[], mechanism: string | undefined): void => {
    if (secretSchemas.has(s)) {
      const key = `${mechanism ?? ''}:${path.join('.')}`;
      found.set(key, { path: path.join('.'), ...(mechanism ? { mechanism } : {}) });
      return;
    }
    const def = defOf(s);
    switch (def.type) {
      case 'object': {
        const literal = def.shape?.mechanism ? defOf(def.shape.mechanism).values?.[0] : undefined;
        const branch = typeof literal === 'string' ? literal : mechanism;
        for (const [key, child] of Object.entries(def.shape ?? {})) walk(child, [...path, key], branch);
        return;
      }
      case 'optional':
      case 'nullable':
      case 'default':
      case 'prefault':
      case 'readonly':
      case 'catch':
        return walk(def.innerType!, path, mechanism);
      case 'lazy':
        return walk((def as { getter?: () => z.ZodType }).getter!(), path, mechanism);
      case 'union':
        return def.options?.forEach((o) => walk(o, path, mechanism));
      case 'array':
        return walk(def.element!, path, mechanism);
      case 'record':
        return walk(def.valueType!, [...path, '<name>'], mechanism);
      case 'pipe':
        walk(def.in!, path, mechanism);
        return walk(def.out!, path, mechanism);
      default:
        return;
    }
  };
  walk(schema, [], undefined);
  return [...found.values()];
}
