/**
 * Stop signals that arrive before a command has handlers of its own. Loading the CLI's
 * modules (LanceDB's native binding, kafkajs) takes a second or more; a SIGTERM in that
 * window would take Node's default action (death by the signal, exit 143) where an
 * orchestrator that stops a replica just after starting it expects the graceful stop a
 * running one gives (exit 0). bin/kafka-lance holds them from its first lines;
 * `kafka-lance run` has them delivered to its handler once it has one; every other
 * command gives them Node's default action back.
 *
 * The listeners installed here stay for the life of the process and change what they
 * do: a signal still waiting in Node's queue when a listener is removed is dropped
 * (Node stops watching a signal nobody listens to), so removing them to hand over would
 * lose exactly the signal this exists for.
 *
 * Imports nothing, so that the bin can load it before anything slow.
 */

const STOP_SIGNALS: readonly NodeJS.Signals[] = ['SIGTERM', 'SIGINT'];

export type StopSignalHandler = (signal: NodeJS.Signals) => void;

export interface HeldSignals {
  /** Every stop signal goes to `handler` from now on; one held already goes to it at once. */
  deliverTo(handler: StopSignalHandler): void;
  /** Stop signals get Node's default action again; one held is raised again now. */
  release(): void;
}

/** Holds SIGTERM and SIGINT until `deliverTo` or `release`. */
export function holdStopSignals(): HeldSignals {
  let held: NodeJS.Signals | undefined;
  let handler: StopSignalHandler | 'default' | undefined;
  const raiseByDefault = (signal: NodeJS.Signals) => {
    for (const s of STOP_SIGNALS) process.off(s, onSignal);
    process.kill(process.pid, signal);
  };
  function onSignal(signal: NodeJS.Signals): void {
    if (handler === undefined) held ??= signal;
    else if (handler === 'default') raiseByDefault(signal);
    else handler(signal);
  }
  for (const signal of STOP_SIGNALS) process.on(signal, onSignal);
  const handOver = (to: StopSignalHandler | 'default') => {
    handler = to;
    const signal = held;
    held = undefined;
    if (signal !== undefined) onSignal(signal);
  };
  return {
    deliverTo: (to) => handOver(to),
    release: () => handOver('default'),
  };
}
