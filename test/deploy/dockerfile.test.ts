import { existsSync } from 'node:fs';
import * as path from 'node:path';
import {
  ROOT,
  argValue,
  defaultMetricsPort,
  dockerInstructions,
  envNamesReadBySource,
  EXTERNAL_ENV,
  metricsServerPaths,
  read,
} from './deploy-files';

const DOCKERFILE = 'deploy/Dockerfile';
const all = dockerInstructions(DOCKERFILE);
const lastStage = Math.max(...all.map((i) => i.stage));
const runtime = all.filter((i) => i.stage === lastStage);
const builder = all.filter((i) => i.stage === 0);
const one = (list: typeof all, instruction: string) => list.filter((i) => i.instruction === instruction);
const jsonArgs = (args: string): string[] => JSON.parse(args) as string[];
const runtimeEnv = Object.fromEntries(
  one(runtime, 'ENV').flatMap((e) =>
    [...e.args.matchAll(/([A-Z_][A-Z0-9_]*)=("[^"]*"|\S+)/g)].map((m) => [m[1]!, m[2]!.replace(/"/g, '')]),
  ),
);

describe('deploy/Dockerfile', () => {
  test('is multi-stage: a builder and a glibc slim runtime on the tested Node major (LanceDB needs glibc: no alpine)', () => {
    const froms = one(all, 'FROM').map((f) => f.args);
    const major = read('.nvmrc').trim().split('.')[0]!;
    expect(froms.length).toBeGreaterThanOrEqual(2);
    expect(froms[0]).toMatch(new RegExp(`^node:${major}(-\\S*)? AS builder$`, 'i'));
    expect(froms[froms.length - 1]).toMatch(new RegExp(`^node:${major}-\\S*slim(\\s+AS\\s+\\S+)?$`, 'i'));
    for (const f of froms) expect(f).not.toMatch(/alpine/i);
  });

  test('the builder installs from the lockfile, builds and prunes dev dependencies', () => {
    const runs = one(builder, 'RUN').map((r) => r.args);
    expect(runs.some((r) => /\bnpm ci\b/.test(r))).toBe(true);
    expect(runs.some((r) => /\bnpm run build\b/.test(r))).toBe(true);
    expect(runs.some((r) => /\bnpm prune --omit=dev\b/.test(r))).toBe(true);
    // A .ts definition needs the typescript package at load time (src/config/load.ts).
    expect(read('src/config/load.ts')).toContain("require('typescript')");
    expect(runs.some((r) => r.includes('node_modules/typescript'))).toBe(true);
  });

  test('the runtime stage installs no npm packages and copies what bin/kafka-lance needs', () => {
    for (const r of one(runtime, 'RUN')) expect(r.args).not.toMatch(/\bnpm (install|i|ci)\b|\byarn\b/);
    const copies = one(runtime, 'COPY').map((c) => c.args);
    const workdir = one(runtime, 'WORKDIR').at(-1)?.args;
    expect(workdir).toBe('/app');
    expect(copies).toEqual(
      expect.arrayContaining([
        '--from=builder /app/node_modules ./node_modules',
        '--from=builder /app/dist/src ./dist/src',
        '--from=builder /app/package.json ./package.json', // --version reads it
        'bin ./bin',
      ]),
    );
    expect(read('bin/kafka-lance')).toContain("require('../dist/src/cli/main.js')");
  });

  test('every COPY from the context exists and is not excluded by .dockerignore', () => {
    const ignored = read('.dockerignore')
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l !== '' && !l.startsWith('#'));
    expect(ignored).toEqual(expect.arrayContaining(['node_modules', 'dist', '.git']));
    const sources = one(all, 'COPY')
      .filter((c) => !c.args.startsWith('--from'))
      .flatMap((c) => c.args.split(/\s+/).slice(0, -1));
    expect(sources.length).toBeGreaterThan(3);
    for (const source of sources) {
      expect([source, existsSync(path.join(ROOT, source))]).toEqual([source, true]);
      expect([source, ignored.includes(source.split('/')[0]!)]).toEqual([source, false]);
    }
  });

  test('runs as a non-root user', () => {
    const user = one(runtime, 'USER').at(-1)?.args;
    expect(user).toBeDefined();
    expect(user).not.toMatch(/^(root|0)(:|$)/);
  });

  test('tini is PID 1 and forwards SIGTERM to node bin/kafka-lance', () => {
    expect(one(runtime, 'RUN').some((r) => /apt-get install[^&]*\btini\b/.test(r.args))).toBe(true);
    const entrypoint = jsonArgs(one(runtime, 'ENTRYPOINT').at(-1)!.args);
    expect(entrypoint).toEqual(['tini', '--', 'node', 'bin/kafka-lance']);
  });

  test('the default command runs the definition mounted at /config/consumer.json', () => {
    const cmd = jsonArgs(one(runtime, 'CMD').at(-1)!.args);
    expect(cmd[0]).toBe('run');
    expect(argValue(cmd, '-c')).toBe('/config/consumer.json');
  });

  test('EXPOSE and HEALTHCHECK use the metrics port the process listens on, and /healthz exists', () => {
    const port = Number(runtimeEnv.KAFKA_LANCE_METRICS_PORT ?? defaultMetricsPort());
    expect(port).toBe(defaultMetricsPort());
    expect(one(runtime, 'EXPOSE').map((e) => e.args)).toEqual([String(port)]);
    const health = one(runtime, 'HEALTHCHECK').at(-1)!.args;
    expect(health).toContain('/healthz');
    expect(metricsServerPaths()).toContain('/healthz');
    // The check reads the same variable with the same default as the CLI.
    expect(health).toContain(`process.env.KAFKA_LANCE_METRICS_PORT||${defaultMetricsPort()}`);
  });

  test('VOLUME is the data directory the process uses (KAFKA_LANCE_DATA_DIR)', () => {
    expect(runtimeEnv.KAFKA_LANCE_DATA_DIR).toBe('/data');
    expect(one(runtime, 'VOLUME').map((v) => v.args)).toEqual([runtimeEnv.KAFKA_LANCE_DATA_DIR]);
  });

  test('sets only environment variables the process (or Node) reads', () => {
    const read = envNamesReadBySource();
    for (const name of Object.keys(runtimeEnv)) {
      expect([name, read.has(name) || EXTERNAL_ENV.has(name)]).toEqual([name, true]);
    }
  });
});
