import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Metrics } from './metrics';

export interface MetricsServerOptions {
  readonly port: number;
  readonly host: string;
  readonly metrics: Metrics;
  /** Ready: recovery finished and the consumer joined its group. */
  readonly ready: () => boolean;
}

/**
 * `/metrics` (Prometheus text), `/healthz` (the process answers: liveness must not
 * depend on Kafka or storage) and `/readyz` (recovery done and joined the group).
 */
export async function startMetricsServer(o: MetricsServerOptions): Promise<http.Server & { port: number }> {
  const server = http.createServer((req, res) => {
    const url = req.url?.split('?')[0];
    if (url === '/metrics') {
      o.metrics.registry
        .metrics()
        .then((text) => {
          res.writeHead(200, { 'content-type': o.metrics.registry.contentType });
          res.end(text);
        })
        .catch((error: unknown) => {
          res.writeHead(500);
          res.end(String(error));
        });
    } else if (url === '/healthz') {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end('ok\n');
    } else if (url === '/readyz') {
      const ready = o.ready();
      res.writeHead(ready ? 200 : 503, { 'content-type': 'text/plain' });
      res.end(ready ? 'ready\n' : 'not ready\n');
    } else {
      res.writeHead(404);
      res.end();
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(o.port, o.host, resolve);
  });
  server.unref();
  return Object.assign(server, { port: (server.address() as AddressInfo).port });
}
