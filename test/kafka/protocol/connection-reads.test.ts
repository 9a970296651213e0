import * as net from 'node:net';
import { installConnectionReads } from '../../../src/kafka/protocol/connection-reads';
import { framedSocketFactory } from '../../../src/kafka/protocol/framed-socket';

/* eslint-disable @typescript-eslint/no-require-imports -- kafkajs internals, pinned at 2.2.4 */
interface ConnectionState {
  chunks: Buffer[];
  bytesBuffered: number;
  bytesNeeded: number;
  authHandlers: { onSuccess(raw: Buffer): void; onError(): void } | null;
  authExpectResponse: boolean;
  requestQueue: { fulfillRequest(r: { size: number; correlationId: number; payload: Buffer }): void };
}
type ProcessData = (this: ConnectionState, data: Buffer) => unknown;
const Connection = require('kafkajs/src/network/connection') as {
  new (options: Record<string, unknown>): {
    connect(): Promise<unknown>;
    send(request: Record<string, unknown>): Promise<Buffer>;
    disconnect(): Promise<unknown>;
  };
  prototype: { processData: ProcessData };
};
const kafkajsSocketFactory = (
  require('kafkajs/src/network/socketFactory') as () => typeof framedSocketFactory
)();
const Encoder = require('kafkajs/src/protocol/encoder') as new () => unknown;
const { createLogger, LEVELS } = require('kafkajs/src/loggers') as {
  createLogger(o: { level: number; logCreator: () => () => void }): unknown;
  LEVELS: { NOTHING: number };
};
/* eslint-enable @typescript-eslint/no-require-imports */

const kafkajsProcessData = Connection.prototype.processData;
installConnectionReads();
const adjustedProcessData = Connection.prototype.processData;

function frame(size: number, seed: number): Buffer {
  const out = Buffer.alloc(4 + size);
  out.writeInt32BE(size, 0);
  for (let i = 0; i < size; i++) out[4 + i] = (seed * 131 + i * 7) & 0xff;
  if (size >= 4) out.writeInt32BE(seed, 4); // the correlation id
  return out;
}

function seeded(seed: number): (n: number) => number {
  let s = seed >>> 0;
  return (n) => {
    s = (Math.imul(s, 1103515245) + 12345) >>> 0;
    return (s >>> 8) % n;
  };
}

/** A Connection's read state, as kafkajs's constructor leaves it; `out` records what it decodes. */
function connectionState(out: string[], auth: 'none' | 'expect' | 'raw'): ConnectionState {
  const state: ConnectionState = {
    chunks: [],
    bytesBuffered: 0,
    bytesNeeded: 4,
    authHandlers: null,
    authExpectResponse: false,
    requestQueue: {
      fulfillRequest: (r) => out.push(`R ${r.size} ${r.correlationId} ${r.payload.toString('hex')}`),
    },
  };
  if (auth !== 'none') {
    state.authExpectResponse = auth === 'expect';
    state.authHandlers = {
      onSuccess: (raw) => {
        out.push(`A ${raw.toString('hex')}`);
        state.authHandlers = null;
        state.authExpectResponse = false;
      },
      onError: () => out.push('E'),
    };
  }
  return state;
}

/**
 * The dropped empty leftover must change nothing kafkajs decodes: its processData and the
 * adjusted one, fed the same reads (whole frames with empty ones between, or any cut,
 * several responses in one read), in each authentication state, decode the same responses.
 */
test("dropping an empty leftover chunk changes nothing kafkajs's processData decodes", () => {
  expect(adjustedProcessData).not.toBe(kafkajsProcessData);
  for (let seed = 1; seed <= 600; seed++) {
    const next = seeded(seed);
    const frames = Array.from({ length: 1 + next(10) }, (_, i) =>
      frame([0, 4, 5, 9, 100, 5000, 70_000][next(7)]!, i),
    );
    const stream = Buffer.concat(frames);
    const reads: Buffer[] = [];
    if (next(3) === 0) {
      for (const f of frames) {
        reads.push(f);
        if (next(2)) reads.push(Buffer.alloc(0));
      }
    } else {
      for (let at = 0; at < stream.length;) {
        const length = next(5) === 0 ? 0 : 1 + next([3, 7, 3000, 70_000][next(4)]!);
        reads.push(stream.subarray(at, Math.min(stream.length, at + length)));
        at += length;
      }
    }
    for (const auth of ['none', 'expect', 'raw'] as const) {
      const decoded: string[][] = [];
      for (const processData of [kafkajsProcessData, adjustedProcessData]) {
        const out: string[] = [];
        const state = connectionState(out, auth);
        for (const read of reads) {
          try {
            processData.call(state, Buffer.from(read));
          } catch (error) {
            out.push(`X ${(error as Error).message}`);
          }
        }
        out.push(
          `left ${Buffer.concat(state.chunks).toString('hex')} ${state.bytesBuffered} ${state.bytesNeeded}`,
        );
        decoded.push(out);
      }
      expect(decoded[1]).toEqual(decoded[0]);
    }
  }
});

test('a whole frame after an empty leftover is read in place, not joined into a copy', () => {
  const out: Buffer[] = [];
  const state = connectionState([], 'none');
  state.chunks = [Buffer.alloc(0)];
  state.requestQueue.fulfillRequest = (r) => out.push(r.payload);
  const response = frame(7, 42);
  adjustedProcessData.call(state, response);
  expect(out).toHaveLength(1);
  expect(out[0]!.buffer).toBe(response.buffer);
});

/**
 * A broker that ends the connection halfway through a response (a restart, a reset), then
 * answers whole on the next: the Connection kafkajs reuses must read the next response from
 * its start. Before, its first bytes were taken as the rest of the cut one and every request
 * on that connection timed out. Both ways of reading a socket: the framed one drops a cut
 * frame with its socket, kafkajs's own (TLS, or KAFKA_LANCE_FRAMED_SOCKET=off) needed the
 * cleared state.
 */
test.each([
  ['framed reads', framedSocketFactory],
  ["kafkajs's own reads", kafkajsSocketFactory],
])(
  'after a response cut off by the broker, the reconnected connection reads whole responses (%s)',
  async (_name, socketFactory) => {
    let connections = 0;
    const server = net.createServer((socket) => {
      const first = connections++ === 0;
      socket.on('data', (request: Buffer) => {
        const response = Buffer.alloc(4 + 4 + 100, 7);
        response.writeInt32BE(104, 0);
        response.writeInt32BE(request.readInt32BE(8), 4); // the request's correlation id
        if (first) socket.end(response.subarray(0, 50));
        else socket.write(response);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as net.AddressInfo).port;
    const connection = new Connection({
      host: '127.0.0.1',
      port,
      logger: createLogger({ level: LEVELS.NOTHING, logCreator: () => () => {} }),
      socketFactory,
      requestTimeout: 3_000,
      connectionTimeout: 3_000,
    });
    const request = {
      request: {
        apiKey: 18,
        apiVersion: 0,
        apiName: 'ApiVersions',
        encode: () => Promise.resolve(new Encoder()),
      },
      response: { decode: (p: Buffer) => Promise.resolve(p), parse: (p: Buffer) => Promise.resolve(p) },
    };
    try {
      await connection.connect();
      await expect(connection.send(request)).rejects.toThrow(/Closed connection|Connection/);
      await new Promise((r) => setTimeout(r, 50));
      await connection.connect();
      const payload = await connection.send(request);
      expect(payload).toHaveLength(100);
    } finally {
      await connection.disconnect();
      await new Promise((resolve) => server.close(resolve));
    }
  },
);
