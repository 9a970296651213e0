import type { Campaign } from './campaign';

/** Consecutive runs of sorted numbers, as "a–b". */
export function ranges(sorted: readonly number[]): string {
  const out: string[] = [];
  let i = 0;
  while (i < sorted.length) {
    let j = i;
    while (j + 1 < sorted.length && sorted[j + 1] === sorted[j]! + 1) j++;
    out.push(i === j ? `${sorted[i]}` : `${sorted[i]}–${sorted[j]}`);
    i = j + 1;
  }
  return out.join(', ');
}

/** Partitions whose committed offset is not the log end, as "pN committed X / log end Y". */
export async function commitLag(c: Campaign): Promise<string[]> {
  const ends = await c.admin.fetchTopicOffsets(c.topic);
  const [committed] = await c.admin.fetchOffsets({ groupId: c.groupId, topics: [c.topic] });
  const at = new Map(committed!.partitions.map((p) => [p.partition, Number(p.offset)]));
  return ends
    .filter((e) => at.get(e.partition) !== Number(e.high))
    .sort((a, b) => a.partition - b.partition)
    .map((e) => `p${e.partition} committed ${at.get(e.partition)} / log end ${e.high}`);
}

export async function logRecords(
  c: Campaign,
): Promise<{ total: number; ends: Map<number, { low: number; high: number }> }> {
  const ends = await c.admin.fetchTopicOffsets(c.topic);
  const map = new Map(ends.map((e) => [e.partition, { low: Number(e.low), high: Number(e.high) }]));
  return { total: [...map.values()].reduce((n, e) => n + e.high - e.low, 0), ends: map };
}
