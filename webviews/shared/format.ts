// Numbers for people, shared by the webviews.

/** 0.0123 ms, 1.23 ms, 12.3 ms, 123 ms, 1.23 s. */
export function formatMs(ms: number): string {
  if (!Number.isFinite(ms)) return '∞';
  const a = Math.abs(ms);
  if (a >= 1000) return `${(ms / 1000).toFixed(a >= 10_000 ? 1 : 2)} s`;
  if (a >= 100) return `${ms.toFixed(0)} ms`;
  if (a >= 10) return `${ms.toFixed(1)} ms`;
  if (a >= 1) return `${ms.toFixed(2)} ms`;
  if (a === 0) return '0 ms';
  return `${ms.toPrecision(2)} ms`;
}

/** 1023 B, 1.5 KiB, 12.3 MiB, 4.00 GiB. */
export function formatBytes(bytes: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) { value /= 1024; unit++; }
  if (unit === 0) return `${value} B`;
  return `${value.toFixed(value < 10 ? 2 : value < 100 ? 1 : 0)} ${units[unit]}`;
}

export function formatPercent(fraction: number): string {
  const p = fraction * 100;
  return `${p > 0 ? '+' : ''}${p.toFixed(Math.abs(p) < 10 ? 1 : 0)} %`;
}
