import type { Campaign } from './campaign';
import type { FinalCheck } from './final-check-result';

/** The report lines every campaign step shares: the kill log, the replicas' events, the check. */
export function campaignDetails(c: Campaign, check: FinalCheck, extra: readonly string[] = []): string[] {
  const lines: string[] = [
    `- Topic \`${c.topic}\`, group \`${c.groupId}\`, table \`${c.lanceUri}\` (${c.o.partitions} partitions, ${c.o.replicas} replicas, session timeout ${c.o.sessionTimeoutMs} ms)`,
    ...extra,
  ];
  if (c.kills.length > 0) {
    lines.push(
      '',
      '| # | at (s) | replica | pid | aimed at | interrupted (from its last events) | last events | uptime (s) |',
      '| --- | --- | --- | --- | --- | --- | --- | --- |',
      ...c.kills.map(
        (k) =>
          `| ${k.n} | ${k.at} | ${k.replica} | ${k.pid} | ${k.aimedAt} | ${k.interrupted} | ${k.lastEvents} | ${k.uptime} |`,
      ),
      '',
    );
  }
  lines.push(
    `- Replica events over all processes: ${c.count('kafka.join')} group joins, ${c.count('publication')} publications, ${c.count('publication.resume')} interrupted publications resumed, ${c.count('publication.recovery')} recovered, ${c.count('publication.failed')} failed attempts (retried), ${c.count('staging.recovery')} staging recoveries`,
  );
  lines.push(...check.lines);
  const errors = c.errorEvents();
  if (errors.length > 0) {
    lines.push(`- Error-level events logged by the replicas (${errors.length}; first 10):`);
    lines.push(...errors.slice(0, 10).map((e) => `  - \`${e.replace(/`/g, "'")}\``));
  }
  for (const n of c.notes) lines.push(`- ${n}`);
  lines.push(`- Logs: ${c.slots.map((s) => s.logFile).join(', ')}`);
  return lines;
}
