import { existsSync } from 'node:fs';
import * as path from 'node:path';
import { runBounded } from './run-bounded';

/** The port of the Prometheus the tests start (away from a Prometheus on 9090). */
export const PROMETHEUS_TEST_PORT = Number(process.env.PROMETHEUS_LOCAL_PORT ?? 19090);
const SCRIPT = path.resolve(__dirname, '../../deploy/prometheus-local/prometheus-local');
/** prometheus-local's exit code when Prometheus is missing and cannot be installed. */
export const EXIT_UNAVAILABLE = 4;

export interface ScriptResult {
  readonly code: number;
  readonly output: string;
}

export function prometheusLocal(
  command: 'install' | 'start' | 'stop' | 'status',
  args: readonly string[] = [],
  port = PROMETHEUS_TEST_PORT,
): ScriptResult {
  const result = runBounded(SCRIPT, [command, ...args], {
    env: { ...process.env, PROMETHEUS_LOCAL_PORT: String(port) },
    timeoutMs: 600_000,
  });
  return { code: result.status ?? 1, output: `${result.stdout}${result.stderr}`.trim() };
}

/**
 * Installs Prometheus when it is missing (prometheus-local install). Tests skip, with
 * the reason printed, only when it cannot be installed here (not root, no apt-get, apt
 * failed) and PROMETHEUS_LOCAL_REQUIRED is not set; any other failure fails the suite.
 */
export function requirePrometheus(suite: string): boolean {
  const installed = prometheusLocal('install');
  if (installed.code === 0) return true;
  if (installed.code === EXIT_UNAVAILABLE && process.env.PROMETHEUS_LOCAL_REQUIRED !== '1') {
    console.warn(`${suite}: SKIPPED, Prometheus cannot be installed on this machine:\n${installed.output}`);
    return false;
  }
  throw new Error(`prometheus-local install failed (exit ${installed.code}):\n${installed.output}`);
}

/** promtool as prometheus-local finds it (PROMTOOL, else PATH, else /usr/bin). */
export function promtool(args: readonly string[], cwd: string): ScriptResult {
  const bin =
    process.env.PROMTOOL ??
    (process.env.PATH ?? '')
      .split(path.delimiter)
      .map((dir) => path.join(dir, 'promtool'))
      .find((p) => existsSync(p)) ??
    '/usr/bin/promtool';
  const result = runBounded(bin, args, { cwd, timeoutMs: 120_000 });
  return { code: result.status ?? 1, output: `${result.stdout}${result.stderr}`.trim() };
}

export interface PromSample {
  readonly metric: Record<string, string>;
  readonly value: number;
}

export type QueryAnswer =
  { readonly ok: true; readonly samples: PromSample[] } | { readonly ok: false; readonly error: string };

interface ApiAnswer<T> {
  status: 'success' | 'error';
  data?: T;
  errorType?: string;
  error?: string;
}

/** A client of one Prometheus's HTTP API. */
export class PrometheusApi {
  constructor(readonly port = PROMETHEUS_TEST_PORT) {}

  async #get<T>(p: string, params: Record<string, string> = {}): Promise<ApiAnswer<T>> {
    const url = new URL(`http://127.0.0.1:${this.port}${p}`);
    for (const [k, v] of Object.entries(params)) url.searchParams.append(k, v);
    const res = await fetch(url);
    return (await res.json()) as ApiAnswer<T>;
  }

  /** An instant query (/api/v1/query), now. */
  async query(expr: string): Promise<QueryAnswer> {
    type Data =
      | { resultType: 'vector'; result: { metric: Record<string, string>; value: [number, string] }[] }
      | { resultType: 'scalar' | 'string'; result: [number, string] }
      | { resultType: 'matrix'; result: { metric: Record<string, string>; values: [number, string][] }[] };
    const answer = await this.#get<Data>('/api/v1/query', { query: expr });
    if (answer.status !== 'success' || !answer.data)
      return { ok: false, error: `${answer.errorType ?? 'error'}: ${answer.error ?? 'no data'}` };
    const d = answer.data;
    switch (d.resultType) {
      case 'vector':
        return { ok: true, samples: d.result.map((s) => ({ metric: s.metric, value: Number(s.value[1]) })) };
      case 'scalar':
      case 'string':
        return { ok: true, samples: [{ metric: {}, value: Number(d.result[1]) }] };
      case 'matrix':
        return {
          ok: true,
          samples: d.result.map((s) => ({ metric: s.metric, value: Number(s.values.at(-1)![1]) })),
        };
    }
  }

  /** An instant query that must succeed. */
  async samples(expr: string): Promise<PromSample[]> {
    const answer = await this.query(expr);
    if (!answer.ok) throw new Error(`${expr}: ${answer.error}`);
    return answer.samples;
  }

  /** Values of a label over the series that match `match` (what Grafana's label_values() asks). */
  async labelValues(label: string, match?: string): Promise<string[]> {
    const answer = await this.#get<string[]>(
      `/api/v1/label/${encodeURIComponent(label)}/values`,
      match ? { 'match[]': match } : {},
    );
    if (answer.status !== 'success') throw new Error(`label values of ${label}: ${answer.error}`);
    return answer.data ?? [];
  }

  async rules(): Promise<{ name: string; type: string; health: string; lastError?: string }[]> {
    const answer = await this.#get<{
      groups: { rules: { name: string; type: string; health: string; lastError?: string }[] }[];
    }>('/api/v1/rules');
    return (answer.data?.groups ?? []).flatMap((g) => g.rules);
  }

  async alerts(): Promise<{ labels: Record<string, string>; state: string }[]> {
    const answer = await this.#get<{ alerts: { labels: Record<string, string>; state: string }[] }>(
      '/api/v1/alerts',
    );
    return answer.data?.alerts ?? [];
  }

  /** Polls `expr` until `done` accepts its samples. */
  async until(
    expr: string,
    done: (samples: PromSample[]) => boolean,
    timeoutMs = 60_000,
  ): Promise<PromSample[]> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const answer = await this.query(expr);
      if (answer.ok && done(answer.samples)) return answer.samples;
      if (Date.now() > deadline)
        throw new Error(`${expr}: not as expected within ${timeoutMs} ms; last: ${JSON.stringify(answer)}`);
      await new Promise((r) => setTimeout(r, 250));
    }
  }
}
