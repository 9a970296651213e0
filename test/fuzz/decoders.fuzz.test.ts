/**
 * The decoders fed random and mutated bytes never throw; every record
 * is a row or a dead letter with a reason; valid records decode exactly. More runs:
 * `npm run qualify -- --only fuzz` (qualify/steps/fuzz.ts).
 */
import { fuzzDecoders } from './decoder-fuzz';

const SEED = Number(process.env.FUZZ_SEED ?? 1313);

test.each(fuzzDecoders(300, SEED).map((r) => [r.name, r] as const))('%s', (_name, result) => {
  if (result.failed)
    console.error(`seed ${result.seed}: ${result.error}\ncounterexample: ${result.counterexample}`);
  expect(result.failed ? `${result.error} on ${result.counterexample}` : 'passed').toBe('passed');
  expect(result.runs).toBe(300);
});
