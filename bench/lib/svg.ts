/**
 * The report's plot, written by hand (no plotting dependency): one panel per arm,
 * rows done per second (3 s windows, solid, left axis) and resident memory of the
 * arm's process tree (dashed, right axis) against seconds since its process started.
 * Every panel has its own scales: arms differ by 10× in rate.
 */
import type { ArmResult } from './result';

const W = 460;
const H = 170;
const PAD = { left: 62, right: 56, top: 28, bottom: 26 };
const COLS = 2;
/** Rates over trailing windows of this many seconds: a 64 MiB publication lands at once. */
const WINDOW_S = 3;

function rateSeries(a: ArmResult, of: (s: ArmResult['series'][number]) => number): [number, number][] {
  const out: [number, number][] = [];
  let j = 0;
  for (let i = 0; i < a.series.length; i++) {
    const s = a.series[i]!;
    while (j < i && s.t - a.series[j]!.t > WINDOW_S) j++;
    const p = a.series[j]!;
    out.push([s.t, s.t > p.t ? (of(s) - of(p)) / (s.t - p.t) : 0]);
  }
  return out;
}

function niceMax(v: number): number {
  if (!(v > 0)) return 1;
  const e = 10 ** Math.floor(Math.log10(v));
  return [1, 2, 2.5, 5, 10].map((m) => m * e).find((m) => m >= v)!;
}

/** A time axis end that divides into 4 whole ticks. */
function niceTime(v: number): number {
  const step = [1, 2, 5, 10, 15, 20, 30, 60, 120, 300].find((s) => 4 * s >= v) ?? Math.ceil(v / 4 / 60) * 60;
  return 4 * step;
}

const fmt = (v: number) =>
  v >= 1e6 ? `${v / 1e6}M` : v >= 1e3 ? `${Math.round(v / 100) / 10}k` : String(Math.round(v));

function panel(a: ArmResult, x0: number, y0: number): string {
  const rate = rateSeries(a, (s) => s.rows);
  const consumed = a.series.some((s) => s.consumed !== undefined)
    ? rateSeries(a, (s) => s.consumed ?? 0)
    : undefined;
  const tMax = niceTime(Math.max(1, ...a.series.map((s) => s.t)));
  const rMax = niceMax(Math.max(...rate.map((p) => p[1]), ...(consumed ?? []).map((p) => p[1])));
  const mMax = niceMax(Math.max(...a.series.map((s) => s.rssMiB)));
  const pw = W - PAD.left - PAD.right;
  const ph = H - PAD.top - PAD.bottom;
  const x = (t: number) => (x0 + PAD.left + (t / tMax) * pw).toFixed(1);
  const yr = (v: number) => (y0 + PAD.top + ph - (v / rMax) * ph).toFixed(1);
  const ym = (v: number) => (y0 + PAD.top + ph - (v / mMax) * ph).toFixed(1);
  const path = (pts: [number, number][], y: (v: number) => string) =>
    pts.map((p, k) => `${k ? 'L' : 'M'}${x(p[0])},${y(p[1])}`).join('');
  const out = [
    `<text x="${x0 + PAD.left}" y="${y0 + 16}" font-weight="bold">${a.id}: ${a.mibPerSecond} MiB/s, peak ${a.peakRssMiB} MiB${a.problems.length ? ' (PROBLEMS)' : ''}</text>`,
    `<rect x="${x0 + PAD.left}" y="${y0 + PAD.top}" width="${pw}" height="${ph}" fill="none" stroke="#ccc"/>`,
  ];
  for (let k = 0; k <= 2; k++) {
    const yy = y0 + PAD.top + ph - (k / 2) * ph;
    out.push(
      `<text x="${x0 + PAD.left - 4}" y="${yy + 4}" text-anchor="end" fill="#1f77b4">${fmt((rMax * k) / 2)}</text>`,
      `<text x="${x0 + W - PAD.right + 4}" y="${yy + 4}" fill="#d62728">${fmt((mMax * k) / 2)}</text>`,
    );
  }
  for (let k = 0; k <= 4; k++) {
    out.push(
      `<text x="${x((tMax * k) / 4)}" y="${y0 + H - 10}" text-anchor="middle">${Math.round((tMax * k) / 4)} s</text>`,
    );
  }
  out.push(
    consumed ? `<path d="${path(consumed, yr)}" fill="none" stroke="#2ca02c" stroke-width="1.2"/>` : '',
    `<path d="${path(rate, yr)}" fill="none" stroke="#1f77b4" stroke-width="1.5"/>`,
    `<path d="${path(
      a.series.map((s) => [s.t, s.rssMiB]),
      ym,
    )}" fill="none" stroke="#d62728" stroke-width="1.2" stroke-dasharray="4 2"/>`,
  );
  if (a.startedAt > 0) {
    out.push(
      `<line x1="${x(a.startedAt)}" x2="${x(a.startedAt)}" y1="${y0 + PAD.top}" y2="${y0 + PAD.top + ph}" stroke="#999" stroke-dasharray="2 2"/>`,
    );
  }
  return out.join('\n');
}

export function plotSvg(arms: readonly ArmResult[], title: string): string {
  const rows = Math.ceil(arms.length / COLS);
  const width = COLS * W;
  const height = 68 + rows * H;
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="sans-serif" font-size="11">`,
    `<rect width="100%" height="100%" fill="white"/>`,
    `<text x="10" y="18" font-size="13">${title}</text>`,
    `<text x="10" y="36"><tspan fill="#1f77b4">— rows done per second (visible in Lance for the writing arms; left axis, ${WINDOW_S} s windows)</tspan>` +
      `<tspan fill="#2ca02c" dx="12">— kafka-lance: rows consumed per second</tspan></text>`,
    `<text x="10" y="52"><tspan fill="#d62728">- - resident memory of the arm’s processes, MiB (right axis)</tspan>` +
      `<tspan fill="#777" dx="12">⋮ timed start (group joined / data prepared); x: seconds since the arm’s process started</tspan></text>`,
    ...arms.map((a, i) => panel(a, (i % COLS) * W, 62 + Math.floor(i / COLS) * H)),
    '</svg>',
    '',
  ].join('\n');
}
