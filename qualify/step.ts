/**
 * One step of the qualification campaign (`npm run qualify`, issue 13). Each step is a
 * module under qualify/steps/ that exports `step: QualifyStep`; qualify/run.ts runs them
 * one after another and writes qualify/report.md from their reports. A step proves one
 * guarantee against real processes (a real broker, real LanceDB tables on disk, SIGKILLs)
 * and says in its report what it did and what it checked, so that the report can be read
 * without the code.
 */
export interface QualifyContext {
  /** Bootstrap servers of the broker the runner started (127.0.0.1:port). */
  readonly brokers: readonly string[];
  /** How to stop and restart that broker (outage steps); the runner owns it. */
  readonly broker: {
    stop(): Promise<void>;
    start(): Promise<void>;
  };
  /** A fresh directory this step owns (data dirs, tables, logs). */
  readonly workDir: string;
  /** The short variant run inside `npm test`: same checks, smaller volumes, fewer kills. */
  readonly short: boolean;
  /** Seed for every random choice (kill moments, victims, fuzz); printed in the report. */
  readonly seed: number;
  /** Progress lines for the terminal (long steps print one every few seconds). */
  log(line: string): void;
}

export interface QualifyStepReport {
  readonly passed: boolean;
  /** One paragraph: what was done and the verdict, with the numbers. */
  readonly summary: string;
  /** Markdown lines for the report's section of this step (tables, kill log, ranges lost). */
  readonly details: readonly string[];
}

export interface QualifyStep {
  /** Short id used on the command line (`npm run qualify -- --only kill-campaign`). */
  readonly name: string;
  /** The issue item it qualifies, for the report heading. */
  readonly title: string;
  run(context: QualifyContext): Promise<QualifyStepReport>;
}
