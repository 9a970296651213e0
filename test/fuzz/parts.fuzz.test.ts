/**
 * Torn and bit-flipped part files are refused or quarantined, never
 * read as other rows (staging reader and recovery). More runs: qualify/steps/fuzz.ts.
 */
import { promises as fsp } from 'node:fs';
import { tempDir } from '../support/rows';
import { fuzzParts } from './part-fuzz';

const SEED = Number(process.env.FUZZ_SEED ?? 1313);

test('damaged parts (truncations, bit flips, overwrites, appended bytes): refused or a prefix of unchanged rows', async () => {
  const dir = await tempDir('kl-parts-fuzz');
  try {
    for (const r of await fuzzParts(150, SEED, dir)) {
      if (r.failed)
        console.error(`${r.name}: seed ${r.seed}: ${r.error}\ncounterexample: ${r.counterexample}`);
      expect({ name: r.name, verdict: r.failed ? `${r.error} on ${r.counterexample}` : 'passed' }).toEqual({
        name: r.name,
        verdict: 'passed',
      });
    }
  } finally {
    await fsp.rm(dir, { recursive: true, force: true });
  }
});
