import type { Campaign } from './campaign';
import { TABLE } from './campaign';
import { readDeadLetters } from './dead-letter-reading';
import { incarnationCount, readableCount, type Incarnations, type ReadableOffsets } from './expected-offsets';
import { leftOver } from './ledger-state';
import { commitLag, logRecords } from './log-offsets';
import { sleep } from './random';
import { countRows } from './table-reading';

/**
 * Waits for quiescence: committed offsets at the log end and rows + dead letters =
 * records in the log (or the `readable` records of a log with gaps), and every data dir
 * drained; gives up after `timeoutMs` (a stall: reported, then checked as it stands).
 */
export async function settle(
  c: Campaign,
  timeoutMs: number,
  readable?: ReadableOffsets | Incarnations,
): Promise<{ seconds: number; stalled?: string }> {
  const started = Date.now();
  let lastLine = 0;
  for (;;) {
    const lag = await commitLag(c).catch((e: unknown) => [`offsets unreadable: ${String(e)}`]);
    const log = readable
      ? { total: 'byTopicId' in readable ? incarnationCount(readable) : readableCount(readable) }
      : await logRecords(c).catch(() => ({ total: -1 }));
    const dead = [...readDeadLetters(c, (n) => `${n}.jsonl`).values()].reduce((n, s) => n + s.size, 0);
    const rows = await countRows(c).catch(() => -1);
    // Rows can all be in Lance while a publication that landed is not marked yet (its
    // retry is due later): quiescent also means every data dir drained.
    const busy = c.slots.flatMap((sl) => leftOver(sl.dataDir, TABLE).map((w) => `${sl.label}: ${w}`));
    if (lag.length === 0 && rows + dead === log.total && busy.length === 0)
      return { seconds: (Date.now() - started) / 1000 };
    if (Date.now() - lastLine > 5_000) {
      c.log(
        `settling: rows ${rows} + dead letters ${dead} / log ${log.total}; ${lag.length === 0 ? 'offsets committed' : lag.slice(0, 3).join('; ')}${busy.length > 0 ? `; ${busy.join(', ')}` : ''}`,
      );
      lastLine = Date.now();
    }
    if (Date.now() - started > timeoutMs) {
      return {
        seconds: (Date.now() - started) / 1000,
        stalled: `not quiescent after ${timeoutMs / 1000} s: rows ${rows} + dead letters ${dead} / log ${log.total}; ${lag.join('; ') || 'offsets committed'}${busy.length > 0 ? `; still in the data dirs: ${busy.join(', ')}` : ''}`,
      };
    }
    await sleep(2_000);
  }
}
