import { promises as fsp } from 'node:fs';
import * as path from 'node:path';

const ROOTS = ['test', 'qualify', 'bench'].map((d) => path.resolve(__dirname, '../..', d));
/** A title that starts with, or carries, a tracker number: `'13: …'`, `'item 8: …'`, `'… (issue 9, item 7)'`. */
const NUMBERED =
  /\b(?:test|it|describe)(?:\.each\([^)]*\))?\(\s*['`"](?:(?:issue|item)\s+\d+|\d+[a-z]?\s*[:.)])|\b(?:test|it|describe)\(\s*['`"][^'`"\n]*\b(?:issue|item) \d+/;

async function sources(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await fsp.readdir(dir, { withFileTypes: true }).catch(() => [])) {
    if (entry.name === 'node_modules' || entry.name.startsWith('.')) continue;
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) out.push(...(await sources(full)));
    else if (entry.name.endsWith('.ts')) out.push(full);
  }
  return out;
}

test('test titles name the hazard they guard, never a tracker number a newcomer cannot look up', async () => {
  const offenders: string[] = [];
  for (const root of ROOTS) {
    for (const file of await sources(root)) {
      const lines = (await fsp.readFile(file, 'utf8')).split('\n');
      lines.forEach((line, i) => {
        if (NUMBERED.test(line))
          offenders.push(`${path.relative(path.dirname(root), file)}:${i + 1}: ${line.trim()}`);
      });
    }
  }
  expect(offenders).toEqual([]);
});
