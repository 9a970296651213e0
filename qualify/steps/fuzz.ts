/**
 * Qualification step: fuzzed input. Runs the fuzzers of test/fuzz/
 * with many more runs than `npm test` does, from the campaign's seed:
 * - the decoders (record decoder with a declared and an inferred schema, the exact JSON
 *   parser against JSON.parse, timestamps, field codecs) on arbitrary bytes and on valid
 *   records with mutations (truncations, bit flips, huge numbers, deep nesting, invalid
 *   UTF-8, NUL, lone surrogates): never a throw; every record a row or a dead letter
 *   with a reason; valid records exact;
 * - fuzzed records through the real staging worker pool: no worker fails;
 * - damaged part files (truncated, bit-flipped, overwritten, appended to): the reader
 *   refuses them, recovery keeps an unchanged prefix or quarantines them.
 */
import type { QualifyContext, QualifyStep, QualifyStepReport } from '../step';
import { fuzzDecoders, type PropertyRun } from '../../test/fuzz/decoder-fuzz';
import { fuzzParts } from '../../test/fuzz/part-fuzz';
import { fuzzThroughPool, type PoolFuzzReport } from '../../test/fuzz/pool-fuzz';

export const step: QualifyStep = {
  name: 'fuzz',
  title: 'Fuzzed input: decoders, staging worker pool, damaged parts',
  async run(context: QualifyContext): Promise<QualifyStepReport> {
    const decoderRuns = context.short ? 1_000 : 20_000;
    const partRuns = context.short ? 200 : 2_000;
    const poolRecords = context.short ? 2_000 : 20_000;
    const started = Date.now();
    context.log(`fuzz: decoders, ${decoderRuns} runs per property, seed ${context.seed}`);
    const properties: PropertyRun[] = fuzzDecoders(decoderRuns, context.seed);
    context.log(`fuzz: damaged parts, ${partRuns} runs per property`);
    properties.push(...(await fuzzParts(partRuns, context.seed, context.workDir)));
    const pools: { schema: string; report: PoolFuzzReport }[] = [];
    for (const schema of ['declared', 'infer'] as const) {
      context.log(`fuzz: ${poolRecords} fuzzed records through the staging worker pool (${schema} schema)`);
      pools.push({
        schema,
        report: await fuzzThroughPool(poolRecords, context.seed, context.workDir, schema),
      });
    }
    const failed = properties.filter((p) => p.failed);
    const poolProblems = pools.flatMap((p) => p.report.problems.map((x) => `${p.schema}: ${x}`));
    const passed = failed.length === 0 && poolProblems.length === 0;
    const details = [
      `Seed ${context.seed}; ${((Date.now() - started) / 1000).toFixed(1)} s.`,
      '',
      '| property | runs | inputs | valid / read whole | dead letters / refused | verdict |',
      '| --- | --- | --- | --- | --- | --- |',
      ...properties.map((p) => {
        const dead = Object.values(p.counts.deadLetters).reduce((n, x) => n + (x ?? 0), 0);
        return `| ${p.name} | ${p.runs} | ${p.counts.records} | ${p.counts.valid} | ${dead || p.counts.rows} | ${
          p.failed ? `FAILED: ${p.error} on ${p.counterexample}` : 'passed'
        } |`;
      }),
      '',
      '| staging worker pool | records | rows staged | dead letters by reason | problems |',
      '| --- | --- | --- | --- | --- |',
      ...pools.map(
        (p) =>
          `| ${p.schema} schema | ${p.report.records} | ${p.report.rows} | ${JSON.stringify(p.report.deadLetters)} | ${
            p.report.problems.length === 0 ? 'none' : p.report.problems.join('; ')
          } |`,
      ),
    ];
    const inputs =
      properties.reduce((n, p) => n + p.counts.records, 0) + pools.reduce((n, p) => n + p.report.records, 0);
    return {
      passed,
      summary: `${passed ? 'Passed' : 'FAILED'}: ${properties.length} fuzz properties (${inputs} inputs in all, seed ${context.seed}) and ${pools.length} runs of ${poolRecords} fuzzed records through the real staging worker pool; ${
        failed.length === 0
          ? 'no counterexample'
          : `counterexamples in ${failed.map((p) => p.name).join(', ')}`
      }; ${poolProblems.length === 0 ? 'no worker failed, every record was a row or a dead letter with a reason' : poolProblems.join('; ')}.`,
      details,
    };
  },
};
