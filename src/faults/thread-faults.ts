import { getEnvironmentData, setEnvironmentData } from 'node:worker_threads';
import { NO_FAULTS, type Faults } from './faults';

/**
 * The faults of this thread, for the points that fire inside worker threads (crash
 * points in the materializer's worker, injected full disks in the staging workers).
 * The process hands its parsed faults over once (shareFaults, from Replica.start);
 * Node clones environment data into every worker started afterwards, so each worker
 * gets them with its start as the staging and materializer workers get their own
 * start data, and no thread reads a test variable of its own.
 */
const KEY = 'kafka-lance.faults';

let current: Faults | undefined;

/** Sets this thread's faults and those of every worker thread it starts from now on. */
export function shareFaults(faults: Faults): void {
  setEnvironmentData(KEY, faults);
  current = faults;
}

/** This thread's faults: those shared by the thread that started it, or none. */
export function threadFaults(): Faults {
  // Read once per thread: the fault points run on hot paths (every part write).
  current ??= (getEnvironmentData(KEY) as Faults | undefined) ?? NO_FAULTS;
  return current;
}
