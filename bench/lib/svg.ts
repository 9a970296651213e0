/**
 * The report's plot, written by hand (no plotting dependency): for each arm, rows/s
 * over time (top panel, from the rows-done series, 1 s windows) and resident memory
 * over time (bottom panel), both against seconds since the arm's process started.
 */
import type { ArmResult } from './result';

const COLORS = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b', '#e377c2', '#7f7f7f'];
const W = 900;
const PANEL = 260;
const LEFT = 70;
const TOP = 40;
const GAP = 60;

function rateSeries(a: ArmResult): [number, number][] {
  const out: [number, number][] = [];
  let j = 0;
  for (let i = 0; i < a.series.length; i++) {
    const s = a.series[i]!;
    while (j < i && s.t - a.series[j]!.t > 1) j++;
    const p = a.series[j]!;
    out.push([s.t, s.t > p.t ? (s.rows - p.rows) / (s.t - p.t) : 0]);
  }
  return out;
}

function niceMax(v: number): number {
  if (!(v > 0)) return 1;
  const e = 10 ** Math.floor(Math.log10(v));
  return [1, 2, 2.5, 5, 10].map((m) => m * e).find((m) => m >= v)!;
}

function panel(
  y0: number,
  title: string,
  unit: string,
  series: { name: string; points: [number, number][] }[],
  tMax: number,
): string {
  const vMax = niceMax(Math.max(...series.flatMap((s) => s.points.map((p) => p[1]))));
  const plotW = W - LEFT - 200;
  const x = (t: number) => LEFT + (t / tMax) * plotW;
  const y = (v: number) => y0 + PANEL - (v / vMax) * PANEL;
  const parts = [`<text x="${LEFT}" y="${y0 - 10}" font-weight="bold">${title}</text>`];
  for (let k = 0; k <= 4; k++) {
    const v = (vMax * k) / 4;
    parts.push(
      `<line x1="${LEFT}" x2="${LEFT + plotW}" y1="${y(v)}" y2="${y(v)}" stroke="#ddd"/>`,
      `<text x="${LEFT - 6}" y="${y(v) + 4}" text-anchor="end">${Math.round(v).toLocaleString('en')}</text>`,
    );
  }
  for (let k = 0; k <= 5; k++) {
    const t = (tMax * k) / 5;
    parts.push(`<text x="${x(t)}" y="${y0 + PANEL + 16}" text-anchor="middle">${Math.round(t)} s</text>`);
  }
  parts.push(
    `<text x="12" y="${y0 + PANEL / 2}" transform="rotate(-90 12 ${y0 + PANEL / 2})">${unit}</text>`,
  );
  series.forEach((s, i) => {
    const d = s.points.map((p, k) => `${k ? 'L' : 'M'}${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`).join('');
    parts.push(`<path d="${d}" fill="none" stroke="${COLORS[i % COLORS.length]}" stroke-width="1.5"/>`);
  });
  return parts.join('\n');
}

export function plotSvg(arms: readonly ArmResult[], title: string): string {
  const tMax = Math.max(1, ...arms.flatMap((a) => a.series.map((s) => s.t)));
  const H = TOP + 2 * PANEL + GAP + 40;
  const legend = arms
    .map(
      (a, i) =>
        `<rect x="${W - 190}" y="${TOP + i * 18}" width="12" height="12" fill="${COLORS[i % COLORS.length]}"/>` +
        `<text x="${W - 172}" y="${TOP + i * 18 + 10}">${a.id}</text>`,
    )
    .join('\n');
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" font-family="sans-serif" font-size="11">`,
    `<rect width="100%" height="100%" fill="white"/>`,
    `<text x="${LEFT}" y="18" font-size="13">${title}</text>`,
    panel(
      TOP + 10,
      'rows done per second (1 s window) vs seconds since the arm started',
      'rows/s',
      arms.map((a) => ({ name: a.id, points: rateSeries(a) })),
      tMax,
    ),
    panel(
      TOP + PANEL + GAP + 10,
      'resident memory of the arm (process tree) vs seconds',
      'MiB',
      arms.map((a) => ({ name: a.id, points: a.series.map((s) => [s.t, s.rssMiB] as [number, number]) })),
      tMax,
    ),
    legend,
    '</svg>',
    '',
  ].join('\n');
}
