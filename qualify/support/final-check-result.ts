import type { IndependentReading } from './independent-reader';

/** The campaign's verdict on the final state: `problems` empty when every guarantee held. */
export interface FinalCheck {
  readonly problems: string[];
  /** Markdown lines: the numbers checked, by both readers. */
  readonly lines: string[];
  readonly logRecords: number;
  readonly deadLetters: number;
  readonly rows: number;
  readonly independent: IndependentReading | undefined;
}
