import { Permits } from '../../src/materializer/permits';

const tick = () => new Promise((r) => setImmediate(r));

describe('permits: one queue per kind, a slot held until its task really settles', () => {
  test('a blocking task keeps its slot after its caller gave up on it; the next task starts only when it ends', async () => {
    const permits = new Permits('decode', 1);
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    const blocking = permits.run(() => gate);
    // The caller stops waiting (its publication failed or was cancelled): the task still runs.
    const abandoned = Promise.race([blocking, Promise.resolve('gave up')]);
    expect(await abandoned).toBe('gave up');
    let started = false;
    const next = permits.run(() => {
      started = true;
      return Promise.resolve();
    });
    await tick();
    expect(started).toBe(false);
    expect(permits.inUse).toBe(1);
    open();
    await next;
    expect(started).toBe(true);
    expect(permits.inUse).toBe(0);
    expect(permits.waits).toBe(1);
  });

  test('a failing task gives its slot back and its caller sees the failure', async () => {
    const permits = new Permits('fetch', 2);
    await expect(permits.run(() => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    expect(permits.inUse).toBe(0);
    expect(permits.waits).toBe(0);
  });

  test('never more tasks than slots run at once, shared by every caller', async () => {
    const permits = new Permits('fetch', 3);
    let running = 0;
    let most = 0;
    await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        permits.run(async () => {
          running += 1;
          most = Math.max(most, running);
          await new Promise((r) => setTimeout(r, i % 3));
          running -= 1;
        }),
      ),
    );
    expect(most).toBe(3);
    expect(permits.waits).toBe(17);
    expect(permits.drainWaits()).toHaveLength(17);
    expect(permits.drainWaits()).toHaveLength(0);
  });

  test('a capacity below one is refused', () => {
    expect(() => new Permits('fetch', 0)).toThrow(RangeError);
  });
});
