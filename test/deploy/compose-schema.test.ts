import { readFileSync, readdirSync } from 'node:fs';
import * as path from 'node:path';
import Ajv from 'ajv';
import { parse } from 'yaml';
import { ROOT, read } from './deploy-files';

/**
 * The compose files against the Compose Specification's JSON schema, as the linter dclint
 * ships it (the schema `docker compose config` validates with: no field it does not name,
 * apart from `x-` extensions).
 */
const schemaFile = path.join(
  path.dirname(require.resolve('dclint/package.json')),
  'schemas/compose.schema.json',
);
const schema = JSON.parse(readFileSync(schemaFile, 'utf8')) as Record<string, unknown>;
// Its $schema is draft-07 spelled with https, an address Ajv does not know; Ajv's default
// dialect is draft-07.
delete schema.$schema;
const validate = new Ajv({ allErrors: true, strict: false }).compile(schema);

/** The schema's errors for a compose file's text, `<path> <message>` each. */
function problems(text: string): string[] {
  const compose = parse(text, { merge: true, maxAliasCount: 100 }) as unknown;
  if (validate(compose)) return [];
  return (validate.errors ?? []).map((e) => {
    const extra = (e.params as { additionalProperty?: string }).additionalProperty;
    return `${e.instancePath || '/'} ${e.message ?? e.keyword}${extra ? `: ${extra}` : ''}`;
  });
}

const composeFiles = readdirSync(path.join(ROOT, 'deploy/compose')).filter((f) => /\.ya?ml$/.test(f));

/** A copy of a compose file with one edit; fails if the edit no longer applies. */
function broken(from: string | RegExp, to: string): string {
  const original = read('deploy/compose/docker-compose.yml');
  const edited = original.replace(from, to);
  expect(edited).not.toBe(original);
  return edited;
}

describe('deploy/compose against the Compose Specification schema', () => {
  test('both compose files are checked', () => {
    expect(composeFiles.sort()).toEqual(['docker-compose.s3-ddb.yml', 'docker-compose.yml']);
  });

  test('the schema is the current specification (it knows top-level name and service develop)', () => {
    const properties = schema.properties as Record<string, unknown>;
    expect(Object.keys(properties)).toEqual(expect.arrayContaining(['name', 'services', 'volumes']));
    expect(schema.additionalProperties).toBe(false);
    const service = (schema.definitions as Record<string, { properties: Record<string, unknown> }>).service!;
    expect(Object.keys(service.properties)).toEqual(expect.arrayContaining(['develop', 'stop_grace_period']));
  });

  test.each(composeFiles)('%s matches the schema', (file) => {
    expect(problems(read(`deploy/compose/${file}`))).toEqual([]);
  });

  test('a copy with a field the schema does not allow, or a value of the wrong type, fails naming it', () => {
    // Merged into every replica through the x-replica anchor.
    expect(problems(broken('stop_grace_period: 35s', 'stop_grace_periods: 35s'))).toEqual(
      [0, 1, 2].map(
        (i) => `/services/kafka-lance-${i} must NOT have additional properties: stop_grace_periods`,
      ),
    );
    expect(problems(broken(/^services:/m, 'service:'))).toContain(
      '/ must NOT have additional properties: service',
    );
    expect(problems(broken(/^(\s+)interval: 5s$/m, '$1interval: [5s]'))).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^\/services\/kafka\/healthcheck\/interval must be string$/),
      ]),
    );
  });
});
