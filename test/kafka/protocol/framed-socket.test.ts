import * as net from 'node:net';
import {
  FrameAssembler,
  MAX_FRAME_ALLOCATED_AHEAD,
  framedSocketFactory,
} from '../../../src/kafka/protocol/framed-socket';

/** A Kafka frame: a 4-byte big-endian size, then that many bytes (seeded, so each frame differs). */
function frame(size: number, seed: number): Buffer {
  const out = Buffer.alloc(4 + size);
  out.writeInt32BE(size, 0);
  for (let i = 0; i < size; i++) out[4 + i] = (seed * 131 + i * 7) & 0xff;
  return out;
}

/** A small deterministic generator, for read sizes. */
function lengths(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state * 1103515245 + 12345) & 0x7fffffff;
    return 1 + (state % 9000);
  };
}

const SIZES = [0, 1, 3, 4, 5, 100, 4096, 70_000, 200_000, 2];

/**
 * Reads as a socket delivers them: anywhere, a size split across reads, several frames in one
 * read. Each frame must come out once, whole and in order, by either way a read can go (into
 * the scratch buffer and copied out, or into the frame in place).
 */
test.each([1, 2, 3])(
  'frames cut at arbitrary read boundaries come out whole and in order (seed %i)',
  (seed) => {
    const frames = SIZES.map((size, i) => frame(size, seed * 100 + i));
    const stream = Buffer.concat(frames);
    const out: Buffer[] = [];
    const assembler = new FrameAssembler((f) => out.push(f));
    const nextLength = lengths(seed);
    let at = 0;
    while (at < stream.length) {
      // As Node does: the read fills at most the buffer it was given.
      const target = assembler.target();
      const bytes = Math.min(target.length, nextLength(), stream.length - at);
      stream.copy(target, 0, at, at + bytes);
      // The scratch buffer is reused: garbage after the read must not reach a frame.
      target.fill(0xee, bytes, Math.min(target.length, bytes + 16));
      assembler.filled(target, bytes);
      at += bytes;
    }
    expect(out.map((f) => f.length)).toEqual(frames.map((f) => f.length));
    out.forEach((f, i) => expect(f.equals(frames[i]!)).toBe(true));
  },
);

test('a frame above the allocate-ahead limit is collected as it arrives and joined whole', () => {
  const frames = [frame(50, 1), frame(5_000, 2), frame(10, 3)];
  const out: Buffer[] = [];
  const assembler = new FrameAssembler((f) => out.push(f), 1_000);
  const stream = Buffer.concat(frames);
  let at = 0;
  while (at < stream.length) {
    const target = assembler.target();
    const bytes = Math.min(333, stream.length - at, target.length);
    stream.copy(target, 0, at, at + bytes);
    assembler.filled(target, bytes);
    at += bytes;
  }
  expect(out).toHaveLength(3);
  out.forEach((f, i) => expect(f.equals(frames[i]!)).toBe(true));
});

test('a negative size is handed on as its 4 bytes alone, and the frames after it still come whole', () => {
  const bad = Buffer.alloc(4);
  bad.writeInt32BE(-1, 0);
  const good = frame(10, 9);
  const out: Buffer[] = [];
  const assembler = new FrameAssembler((f) => out.push(f));
  assembler.push(Buffer.concat([bad, good]), 18);
  expect(out.map((f) => f.toString('hex'))).toEqual([bad.toString('hex'), good.toString('hex')]);
});

/**
 * Through a real socket of the factory: a server writes frames in odd pieces, with pauses so
 * that reads end mid-size and mid-frame; the socket's `data` events are the frames.
 */
test('a socket of the factory emits each frame of a real connection once, whole', async () => {
  const frames = [frame(0, 1), frame(7, 2), frame(300_000, 3), frame(64 * 1024, 4), frame(3, 5)];
  const stream = Buffer.concat(frames);
  const server = net.createServer((conn) => {
    let at = 0;
    const cuts = [2, 3, 1_000, 100_000, 5, 7];
    let i = 0;
    const next = () => {
      if (at >= stream.length) return conn.end();
      const n = Math.min(cuts[i++ % cuts.length]!, stream.length - at);
      conn.write(stream.subarray(at, at + n));
      at += n;
      setTimeout(next, 2);
    };
    next();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  try {
    const received: Buffer[] = [];
    await new Promise<void>((resolve, reject) => {
      const socket = framedSocketFactory({ host: '127.0.0.1', port, ssl: undefined!, onConnect: () => {} });
      socket.on('data', (d: Buffer) => received.push(d));
      socket.on('end', () => {
        socket.destroy();
        resolve();
      });
      socket.on('error', reject);
    });
    expect(received.map((f) => f.length)).toEqual(frames.map((f) => f.length));
    received.forEach((f, i) => expect(f.equals(frames[i]!)).toBe(true));
  } finally {
    await new Promise((resolve) => server.close(resolve));
  }
});

/** Feeds `stream` as a socket would, a read ending at each of `cuts` (and at most its target's length). */
function feed(stream: Buffer, cuts: readonly number[], maxAhead?: number): Buffer[] {
  const out: Buffer[] = [];
  const assembler = new FrameAssembler((f) => out.push(f), maxAhead);
  let at = 0;
  for (const end of [...cuts, stream.length]) {
    while (at < end) {
      const target = assembler.target();
      // A read into no room reads as the end of the stream: the connection would stall.
      expect(target.length).toBeGreaterThan(0);
      const bytes = Math.min(target.length, end - at);
      stream.copy(target, 0, at, at + bytes);
      target.fill(0xee, bytes, Math.min(target.length, bytes + 64));
      assembler.filled(target, bytes);
      at += bytes;
    }
  }
  return out;
}

/** Every split of a stream of small frames into two and three reads, in place and collected. */
test.each([undefined, 6])(
  'frames split at every pair of positions come out whole (allocated ahead up to %p)',
  (maxAhead) => {
    const frames = [
      frame(0, 1),
      frame(1, 2),
      frame(3, 3),
      frame(4, 4),
      frame(9, 5),
      frame(0, 6),
      frame(17, 7),
    ];
    const stream = Buffer.concat(frames);
    const want = frames.map((f) => f.toString('hex'));
    for (let i = 1; i < stream.length; i++) {
      for (let j = i; j < stream.length; j++) {
        const out = feed(stream, j === i ? [i] : [i, j], maxAhead);
        expect(out.map((f) => f.toString('hex'))).toEqual(want);
      }
    }
  },
);

test('a size above the allocate-ahead limit allocates nothing for it: its reads go to the scratch buffer', () => {
  const assembler = new FrameAssembler(() => {});
  const size = Buffer.alloc(4);
  // An HTTP server's answer read as a Kafka size: 1.2 GB.
  size.write('HTTP');
  expect(size.readInt32BE(0)).toBeGreaterThan(MAX_FRAME_ALLOCATED_AHEAD);
  assembler.push(size, 4);
  expect(assembler.target().length).toBe(64 * 1024);
  // Below the limit, the frame is allocated and read in place: the target is its rest.
  const small = new FrameAssembler(() => {});
  small.push(frame(1000, 1), 10);
  expect(small.target().length).toBe(1004 - 10);
});
