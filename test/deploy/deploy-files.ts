/**
 * Reading the deploy files and what the process itself reads, for the deploy tests.
 * Nothing here runs Docker or a cluster: the files are parsed and compared with the
 * source (the env variables, the metrics port, the probe paths, the shutdown timeout).
 */
import { readFileSync, readdirSync, statSync } from 'node:fs';
import * as path from 'node:path';
import { parseAllDocuments } from 'yaml';

export const ROOT = path.resolve(__dirname, '../..');
export const read = (file: string): string => readFileSync(path.join(ROOT, file), 'utf8');

/** Every document of a YAML file; a syntax error or warning fails the caller. */
export function yamlDocuments(file: string): unknown[] {
  const docs = parseAllDocuments(read(file), { merge: true, prettyErrors: true });
  return docs.map((doc) => {
    const problems = [...doc.errors, ...doc.warnings].map((e) => e.message);
    if (problems.length > 0) throw new Error(`${file}: ${problems.join('; ')}`);
    return doc.toJS({ maxAliasCount: 100 }) as unknown;
  });
}

export function yamlFiles(dir: string): string[] {
  return readdirSync(path.join(ROOT, dir))
    .filter((f) => /\.ya?ml$/.test(f))
    .sort();
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const file = path.join(dir, name);
    if (statSync(file).isDirectory()) return sourceFiles(file);
    return file.endsWith('.ts') ? [file] : [];
  });
}

/**
 * Environment variables the process reads: `process.env.X`, `env.X` (the loader's
 * env parameter), `process.env[...]` helpers called with a literal, and the AWS_*
 * names the object-store check lists. Test-only hooks are left out: no deployment
 * may set them.
 */
export function envNamesReadBySource(): Set<string> {
  const names = new Set<string>();
  for (const file of sourceFiles(path.join(ROOT, 'src'))) {
    const text = readFileSync(file, 'utf8');
    for (const re of [
      /\bprocess\.env\.([A-Z][A-Z0-9_]*)/g,
      /\benv\.([A-Z][A-Z0-9_]*)/g,
      /\benvInt\('([A-Z0-9_]+)'\)/g,
    ]) {
      for (const m of text.matchAll(re)) names.add(m[1]!);
    }
    for (const m of text.matchAll(/'(AWS_[A-Z0-9_]+)'/g)) names.add(m[1]!);
  }
  for (const name of names) if (/_TEST_|^JEST_/.test(name)) names.delete(name);
  return names;
}

/** What LanceDB's object_store and Node read by themselves (not visible in src/). */
export const EXTERNAL_ENV = new Set([
  'AWS_ACCESS_KEY_ID',
  'AWS_SECRET_ACCESS_KEY',
  'AWS_SESSION_TOKEN',
  'AWS_REGION',
  'AWS_DEFAULT_REGION',
  'AWS_ENDPOINT_URL',
  'AWS_ALLOW_HTTP',
  'NODE_ENV',
  // read by glibc at process start (src/common/malloc-tuning.ts)
  'MALLOC_ARENA_MAX',
  'MALLOC_MMAP_THRESHOLD_',
  'NODE_OPTIONS',
]);

/** Where `kafka-lance run` declares its flags, and where its process lifecycle lives. */
const RUN_COMMAND = 'src/cli/commands/run.ts';
const RUN_LIFECYCLE = 'src/cli/replica-lifecycle.ts';

function numericDefault(file: string, envName: string): number {
  const m = new RegExp(`process\\.env\\.${envName} \\?\\? ([0-9_]+)`).exec(read(file));
  if (!m) throw new Error(`${file} no longer defaults ${envName} to a number`);
  return Number(m[1]!.replace(/_/g, ''));
}

/** The CLI's default metrics port (KAFKA_LANCE_METRICS_PORT ?? 9464). */
export const defaultMetricsPort = (): number => numericDefault(RUN_COMMAND, 'KAFKA_LANCE_METRICS_PORT');
/** The CLI's default graceful-stop timeout in ms. */
export const defaultShutdownTimeoutMs = (): number =>
  numericDefault(RUN_LIFECYCLE, 'KAFKA_LANCE_SHUTDOWN_TIMEOUT_MS');

/** The paths src/metrics/server.ts answers. */
export function metricsServerPaths(): string[] {
  return [...read('src/metrics/server.ts').matchAll(/url === '(\/[a-z]+)'/g)].map((m) => m[1]!);
}

export interface DockerInstruction {
  readonly instruction: string;
  readonly args: string;
  readonly stage: number;
}

/** Dockerfile instructions with continuation lines joined, comments dropped, each with its stage index. */
export function dockerInstructions(file: string): DockerInstruction[] {
  const logical: string[] = [];
  let current = '';
  for (const raw of read(file).split('\n')) {
    const line = raw.trim();
    if (current === '' && (line === '' || line.startsWith('#'))) continue;
    if (line.startsWith('#')) continue; // a comment inside a continued instruction
    if (line.endsWith('\\')) {
      current += `${line.slice(0, -1).trim()} `;
      continue;
    }
    logical.push(current + line);
    current = '';
  }
  if (current !== '') logical.push(current.trim());
  let stage = -1;
  return logical.map((l) => {
    const m = /^(\S+)\s*(.*)$/.exec(l)!;
    const instruction = m[1]!.toUpperCase();
    if (instruction === 'FROM') stage++;
    return { instruction, args: m[2]!, stage };
  });
}

/** The values of an env list in a container spec or a compose service (map or list form). */
export function envMap(env: unknown): Record<string, string> {
  if (env === undefined || env === null) return {};
  if (Array.isArray(env)) {
    return Object.fromEntries(
      env.map((e: unknown) => {
        if (typeof e === 'string') {
          const i = e.indexOf('=');
          return [e.slice(0, i), e.slice(i + 1)];
        }
        const v = e as { name: string; value?: string; valueFrom?: unknown };
        return [v.name, v.value ?? '(from a reference)'];
      }),
    );
  }
  return Object.fromEntries(Object.entries(env as Record<string, unknown>).map(([k, v]) => [k, String(v)]));
}

/** The value following `flag` in an argument list. */
export function argValue(args: readonly string[], flag: string): string | undefined {
  const i = args.indexOf(flag);
  return i >= 0 ? args[i + 1] : undefined;
}
