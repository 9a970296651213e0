import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { listPartIds } from '../../src/staging/part-ids';
import { tempDir } from '../support/rows';

describe('part ids that hold commits (commit after published)', () => {
  test('listPartIds: ids of open and sealed parts, nothing else; a missing directory has none', async () => {
    const dir = await tempDir('kl-gate');
    try {
      const open = '0123456789abcdef.202611301200.01M8PCDWX5BMCWVGP0GD557N97.arrows.part';
      const sealed = '0123456789abcdef.202611301200.01M8PCE1DC42YMJVF90Q8VT3BJ.arrows';
      for (const f of [open, sealed, 'plan.json', 'x.tmp']) await fsp.writeFile(path.join(dir, f), '');
      await fsp.mkdir(path.join(dir, 'plans'));
      expect((await listPartIds(dir)).sort()).toEqual([
        '01M8PCDWX5BMCWVGP0GD557N97',
        '01M8PCE1DC42YMJVF90Q8VT3BJ',
      ]);
      expect(await listPartIds(path.join(dir, 'nope'))).toEqual([]);
    } finally {
      await fsp.rm(dir, { recursive: true, force: true });
    }
  });

  test('listPartIds: a quarantined part holds commits unless its rows went to the dead-letter output', async () => {
    const dir = await tempDir('kl-gate');
    try {
      const q = path.join(dir, 'quarantine');
      await fsp.mkdir(q);
      const unreadable = '0123456789abcdef.202611301200.01M8PCDWX5BMCWVGP0GD557N97.arrows';
      const lettered = '0123456789abcdef.202611301200.01M8PCE1DC42YMJVF90Q8VT3BJ.arrows';
      const noLetters = '0123456789abcdef.202611301200.01M8PCE1DC42YMJVF90Q8VT3BK.arrows';
      for (const f of [unreadable, lettered, noLetters]) await fsp.writeFile(path.join(q, f), '');
      await fsp.writeFile(
        path.join(q, `${lettered}.reason.json`),
        JSON.stringify({ deadLetterFile: '/x.jsonl' }),
      );
      await fsp.writeFile(
        path.join(q, `${noLetters}.reason.json`),
        JSON.stringify({ reason: 'part-corrupt' }),
      );
      expect((await listPartIds(dir)).sort()).toEqual([
        '01M8PCDWX5BMCWVGP0GD557N97',
        '01M8PCE1DC42YMJVF90Q8VT3BK',
      ]);
    } finally {
      await fsp.rm(dir, { recursive: true, force: true });
    }
  });
});
