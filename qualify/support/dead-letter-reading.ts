import { existsSync, readFileSync } from 'node:fs';
import * as path from 'node:path';
import type { Campaign } from './campaign';

/** Distinct source records in the replicas' dead-letter files (a record redelivered after a kill is written again). */
export function readDeadLetters(c: Campaign, file: (name: string) => string): Map<number, Set<number>> {
  const out = new Map<number, Set<number>>();
  const name = path.basename(c.definitionFile, '.json');
  for (const s of c.slots) {
    const f = path.join(s.dataDir, 'dead-letter', file(name));
    if (!existsSync(f)) continue;
    for (const line of readFileSync(f, 'utf8').split('\n')) {
      if (!line.startsWith('{')) continue;
      try {
        const l = JSON.parse(line) as { topic?: string; partition?: number; offset?: string | number };
        if (l.topic !== c.topic) continue;
        let set = out.get(Number(l.partition));
        if (!set) out.set(Number(l.partition), (set = new Set()));
        set.add(Number(l.offset));
      } catch {
        // a torn last line of a killed writer
      }
    }
  }
  return out;
}

/** The records dead-lettered and the rows of set-aside publications, per partition, with their counts. */
export function readSetAside(c: Campaign): {
  dead: Map<number, Set<number>>;
  setAside: Map<number, Set<number>>;
  deadCount: number;
  setAsideCount: number;
} {
  const dead = readDeadLetters(c, (n) => `${n}.jsonl`);
  const setAside = readDeadLetters(c, (n) => `${n}.publications.jsonl`);
  const count = (m: Map<number, Set<number>>) => [...m.values()].reduce((n, s) => n + s.size, 0);
  return { dead, setAside, deadCount: count(dead), setAsideCount: count(setAside) };
}
