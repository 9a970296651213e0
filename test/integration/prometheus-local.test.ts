import * as net from 'node:net';
import { PrometheusApi, prometheusLocal, requirePrometheus } from '../support/prometheus-local';

/** The script on a port of its own (prometheus.test.ts may run its Prometheus meanwhile). */
const PORT = Number(process.env.PROMETHEUS_TEST_SCRIPT_PORT ?? 19190);
const available = requirePrometheus('prometheus-local.test.ts');
const withPrometheus = available ? test : test.skip;

afterAll(() => {
  if (available) prometheusLocal('stop', [], PORT);
});

withPrometheus(
  'start loads the alert rules and scrapes the target; start again is a no-op, other targets restart it; stop',
  async () => {
    const started = prometheusLocal('start', ['127.0.0.1:9'], PORT);
    expect([started.code, started.output]).toEqual([
      0,
      expect.stringContaining(`up on http://127.0.0.1:${PORT}`),
    ]);
    expect(prometheusLocal('start', ['127.0.0.1:9'], PORT).output).toContain('already running');
    const status = prometheusLocal('status', [], PORT);
    expect([status.code, status.output]).toEqual([0, expect.stringContaining('scraping 127.0.0.1:9')]);
    const api = new PrometheusApi(PORT);
    // Rules are evaluated every second once loaded; a loaded machine may need a few.
    const deadline = Date.now() + 30_000;
    let health = (await api.rules()).map((r) => [r.type, r.health]);
    while (!health.some(([t, h]) => t === 'alerting' && h === 'ok') && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 500));
      health = (await api.rules()).map((r) => [r.type, r.health]);
    }
    expect(health).toContainEqual(['alerting', 'ok']);
    // Nothing listens on port 9: the first scrape (after target discovery, ~5 s) records up == 0.
    await api.until('up{job="kafka-lance",instance="127.0.0.1:9"}', (s) => s[0]?.value === 0, 30_000);

    const restarted = prometheusLocal('start', ['127.0.0.1:10'], PORT);
    expect([restarted.code, restarted.output]).toEqual([0, expect.stringContaining('restarting it empty')]);
    expect(prometheusLocal('status', [], PORT).output).toContain('scraping 127.0.0.1:10');
    const stopped = prometheusLocal('stop', [], PORT);
    expect([stopped.code, stopped.output]).toEqual([0, expect.stringContaining('stopped (pid')]);
    expect(prometheusLocal('status', [], PORT).code).toBe(3);
  },
);

withPrometheus(
  'start fails clearly: a target that is not host:port, a port held by another process',
  async () => {
    prometheusLocal('stop', [], PORT); // whatever an earlier failed test left on the port
    const bad = prometheusLocal('start', ['no-port'], PORT);
    expect([bad.code, bad.output]).toEqual([
      1,
      expect.stringContaining("scrape target 'no-port' is not host:port"),
    ]);
    expect(prometheusLocal('start', [], PORT).code).toBe(2);
    const squatter = net.createServer();
    await new Promise<void>((resolve, reject) => {
      squatter.once('error', reject);
      squatter.listen(PORT, '127.0.0.1', resolve);
    });
    try {
      const started = prometheusLocal('start', ['127.0.0.1:9'], PORT);
      expect(started.code).not.toBe(0);
      expect(started.output).toContain(`127.0.0.1:${PORT} is already in use by another process`);
    } finally {
      await new Promise((resolve) => squatter.close(resolve));
    }
  },
);
