'use strict';
/**
 * kafkajs 2.2.4 (its last release) arms its request queue's throttle check with
 * setTimeout(check, throttledUntil - Date.now()) while no throttle is in force
 * (throttledUntil = -1), so the delay is minus the current time. Node has always run such
 * a timer after 1 ms; Node 24 also prints a TimeoutNegativeWarning to stderr for the first
 * negative delay of a process, which kafkajs sets as it connects: a line on stderr that is
 * neither a log record nor anything an operator can act on. This drops that warning when,
 * and only when, kafkajs's request queue set the timer. Other warnings are printed as
 * before (a later negative delay never was: Node warns about the first one only).
 */
const REQUEST_QUEUE = /[\\/]kafkajs[\\/]src[\\/]network[\\/]requestQueue[\\/]/;

function warningType(warning, typeOrOptions) {
  if (typeof typeOrOptions === 'string') return typeOrOptions;
  if (typeOrOptions && typeof typeOrOptions.type === 'string') return typeOrOptions.type;
  return warning instanceof Error ? warning.name : 'Warning';
}

const emitWarning = process.emitWarning;
process.emitWarning = function emitWarningUnlessKafkajsNegativeTimeout(warning, typeOrOptions, ...rest) {
  if (
    warningType(warning, typeOrOptions) === 'TimeoutNegativeWarning' &&
    REQUEST_QUEUE.test(new Error().stack ?? '')
  ) {
    return;
  }
  return emitWarning.call(process, warning, typeOrOptions, ...rest);
};
