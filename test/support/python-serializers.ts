import { execFile, spawn } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { withInstallLock } from '../../qualify/support/independent-reader';

const run = promisify(execFile);

/**
 * Confluent's Python serializers (confluent-kafka with its schema-registry extras, pinned in
 * python-serializers/requirements.txt), in a venv this module makes on first use: a
 * producer nobody here wrote, registering schemas the way its users' producers do.
 */
const HERE = path.join(__dirname, 'python-serializers');
export const SERIALIZERS_VENV = path.join(HERE, '.venv');
const PYTHON = path.join(SERIALIZERS_VENV, 'bin/python');
const REQUIREMENTS = path.join(HERE, 'requirements.txt');
/** The requirements the venv was made with: another list makes it again. */
const STAMP = path.join(SERIALIZERS_VENV, '.installed-requirements');

/** Creates the venv with the pinned packages from PyPI unless it has them (~60 MB on first use). */
export async function ensurePythonSerializers(timeoutMs = 300_000): Promise<void> {
  const wanted = readFileSync(REQUIREMENTS, 'utf8');
  const installed = () => existsSync(PYTHON) && existsSync(STAMP) && readFileSync(STAMP, 'utf8') === wanted;
  if (installed()) return;
  // Several jest workers may get here at once on a fresh clone: one installs, the others wait.
  await withInstallLock(`${SERIALIZERS_VENV}.install-lock`, 'python serializers', timeoutMs, async () => {
    if (installed()) return;
    await run(process.env.PYTHON ?? 'python3', ['-m', 'venv', '--clear', SERIALIZERS_VENV], {
      timeout: 120_000,
    });
    await run(
      PYTHON,
      ['-m', 'pip', 'install', '--quiet', '--disable-pip-version-check', '-r', REQUIREMENTS],
      {
        timeout: timeoutMs,
        maxBuffer: 16 * 1024 * 1024,
      },
    );
    writeFileSync(STAMP, wanted);
  });
}

interface ProduceRequest {
  readonly brokers: string;
  /** The registry's Confluent API base. */
  readonly registry: string;
  readonly topic: string;
  /** The serializer's configuration; empty for its defaults (auto-registration). */
  readonly conf?: Readonly<Record<string, string | boolean | number>>;
}

/** What to produce, and with which serializer. */
export type PythonValues =
  | {
      readonly format: 'protobuf';
      /** The .proto files by the names they import each other with; protoc makes the classes. */
      readonly files: Readonly<Record<string, string>>;
      /**
       * Each value's message (its full name: package.Message or package.Outer.Inner) and
       * binary encoding, which Python parses into that class and its serializer writes.
       */
      readonly values: readonly { readonly message: string; readonly value: Uint8Array }[];
    }
  | {
      readonly format: 'avro' | 'json';
      readonly schema: string;
      /** JSON values; bytes as `{ $bytes: base64 }`. */
      readonly values: readonly unknown[];
    };

export type PythonProduce = ProduceRequest & PythonValues;

const PRODUCE_TIMEOUT_MS = 120_000;

/** Produces with the Python serializer; returns the schema ids its values were framed with. */
export async function producePython(request: PythonProduce): Promise<{ schemaIds: number[] }> {
  await ensurePythonSerializers();
  const body =
    request.format === 'protobuf'
      ? {
          ...request,
          values: request.values.map((v) => ({ ...v, value: Buffer.from(v.value).toString('base64') })),
        }
      : request;
  const child = spawn(PYTHON, [path.join(HERE, 'produce.py')], { stdio: ['pipe', 'pipe', 'pipe'] });
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  child.stdout.on('data', (c: Buffer) => out.push(c));
  child.stderr.on('data', (c: Buffer) => err.push(c));
  child.stdin.end(JSON.stringify(body));
  // Bounded: a producer that never exits would hold the test to its whole timeout with no word
  // of where it stood (its flush waits 60 s at most).
  const timer = setTimeout(() => child.kill('SIGKILL'), PRODUCE_TIMEOUT_MS);
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  clearTimeout(timer);
  if (code !== 0)
    throw new Error(
      `produce.py (${request.format}) exited ${code ?? `by SIGKILL after ${PRODUCE_TIMEOUT_MS / 1000} s`}:\n${Buffer.concat(err).toString()}`,
    );
  return JSON.parse(Buffer.concat(out).toString()) as { schemaIds: number[] };
}
