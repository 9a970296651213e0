import { silentLogger } from '../../src/common/logger';
import type { IndexSpec } from '../../src/config/index-spec';
import { IndexKeeper } from '../../src/lance/index-keeper';
import { IndexUpkeep, UpkeepSlots } from '../../src/materializer/index-upkeep';

const tick = () => new Promise((r) => setImmediate(r));

test("one worker's tables build their indexes one table at a time: a table's round waits while another's runs", async () => {
  // The keeper's build is the one fake here: a round that ends only when the test says.
  const started: string[] = [];
  const finish = new Map<string, () => void>();
  const connect = jest.spyOn(IndexKeeper, 'connect').mockImplementation((target) =>
    Promise.resolve({
      maintain: () => {
        started.push(target.table);
        return new Promise((resolve) => finish.set(target.table, () => resolve([])));
      },
      close: () => undefined,
    } as unknown as IndexKeeper),
  );
  const specs = [{ column: 'emb', type: 'IVF_PQ' }] as unknown as IndexSpec[];
  const role = { maintainsTable: () => true, commitsBesidePublications: () => true };
  const slots = new UpkeepSlots(1);
  const upkeep = (table: string) =>
    new IndexUpkeep({ uri: '/unused', table }, specs, 1_000, role, silentLogger(), () => undefined, slots);
  const a = upkeep('a');
  const b = upkeep('b');
  a.tick(10_000);
  b.tick(10_000);
  await tick();
  expect(started).toEqual(['a']); // b found the slot taken
  finish.get('a')!();
  await tick();
  await tick();
  b.tick(10_001); // its next tick, not a whole interval later
  await tick();
  expect(started).toEqual(['a', 'b']);
  expect(slots.running).toBe(1);
  finish.get('b')!();
  await Promise.all([a.stop(), b.stop()]);
  expect(slots.running).toBe(0);
  connect.mockRestore();
});
