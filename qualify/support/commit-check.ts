import { loadConsumer } from '../../src/config';
import { inspect } from '../../src/cli/inspect';
import type { Campaign } from './campaign';
import { commitLag } from './log-offsets';

/** Committed offsets = log end, and every replica's data dir clean (both final checks). */
export async function commitAndDataDirs(c: Campaign, problems: string[], lines: string[]): Promise<void> {
  const lag = await commitLag(c);
  if (lag.length > 0) problems.push(`committed offsets behind the log end: ${lag.join('; ')}`);
  lines.push(
    lag.length === 0
      ? '- Committed offsets = log end offsets on every partition.'
      : `- Committed offsets behind the log end: ${lag.join('; ')}`,
  );

  for (const s of c.slots) {
    const consumer = loadConsumer(c.definitionFile, process.env, {
      brokers: [...c.o.context.brokers],
      dataDir: s.dataDir,
    });
    const r = await inspect(consumer);
    const left = [
      r.staging.open.count > 0 ? `${r.staging.open.count} open parts` : '',
      r.staging.sealed.count > 0 ? `${r.staging.sealed.count} sealed parts` : '',
      r.staging.quarantined.count > 0 ? `${r.staging.quarantined.count} quarantined parts` : '',
      r.publications.planned > 0 ? `${r.publications.planned} planned publications` : '',
      r.publications.writing > 0 ? `${r.publications.writing} \`writing\` ledger entries` : '',
    ].filter(Boolean);
    if (left.length > 0) problems.push(`${s.label} data dir not clean: ${left.join(', ')}`);
    lines.push(
      `- ${s.label} data dir (${s.runs.length} processes): ${left.length === 0 ? 'no staged parts, no plans, no `writing` entries, nothing quarantined' : left.join(', ')}`,
    );
  }
}
