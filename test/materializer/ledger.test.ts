import { promises as fsp } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { ledger, plansDir, type Plan, type PlanPart } from '../../src/materializer/ledger';
import type { StagingEpoch } from '../../src/staging/epoch';

const EPOCH: StagingEpoch = { owner: 'o', epoch: 1 };

const part = (partPath: string): PlanPart => ({
  path: partPath,
  bytes: 10,
  checksum: 'c',
  epoch: EPOCH,
  rows: 1,
  keptRows: 1,
  ranges: [],
  keep: [],
});

const plan = (parts: PlanPart[]): Plan => ({
  id: '01PLAN',
  table: 't',
  schemaKey: 'k',
  createdAt: 0,
  parts,
  rows: parts.length,
  bytes: 10 * parts.length,
});

let root: string;
beforeEach(async () => {
  root = await fsp.mkdtemp(path.join(os.tmpdir(), 'plan-ledger-'));
});
afterEach(async () => {
  await fsp.rm(root, { recursive: true, force: true });
});

test('a data directory restored at another path finds its own parts, not the original ones', async () => {
  const original = path.join(root, 'a', 'staging', 't');
  await fsp.mkdir(original, { recursive: true });
  const inside = path.join(original, 'k.202611301200.01X.arrows');
  await ledger.writePlan(original, plan([part(inside)]));

  const stored = JSON.parse(
    await fsp.readFile(path.join(plansDir(original), '01PLAN.plan.json'), 'utf8'),
  ) as Plan;
  expect(stored.parts[0]!.path).toBe('k.202611301200.01X.arrows');

  const restored = path.join(root, 'b', 'staging', 't');
  await fsp.mkdir(path.dirname(restored), { recursive: true });
  await fsp.cp(original, restored, { recursive: true });
  const [entry] = await ledger.list(restored);
  expect(entry!.plan!.parts[0]!.path).toBe(path.join(restored, 'k.202611301200.01X.arrows'));
  const [atOriginal] = await ledger.list(original);
  expect(atOriginal!.plan!.parts[0]!.path).toBe(inside);
});

test('a part outside the table directory, or a plan written with absolute paths, keeps its absolute path', async () => {
  const dir = path.join(root, 'staging', 't');
  await fsp.mkdir(plansDir(dir), { recursive: true });
  const outside = path.join(root, 'elsewhere', 'p.arrows');
  await ledger.writePlan(dir, plan([part(outside)]));
  expect((await ledger.list(dir))[0]!.plan!.parts[0]!.path).toBe(outside);

  // A plan file from before relative paths: absolute inside the table directory.
  const legacy = plan([part(path.join(dir, 'old.arrows'))]);
  await fsp.writeFile(path.join(plansDir(dir), '01PLAN.plan.json'), JSON.stringify({ ...legacy }));
  expect((await ledger.list(dir))[0]!.plan!.parts[0]!.path).toBe(path.join(dir, 'old.arrows'));
});
