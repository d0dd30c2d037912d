// Geometry of the stacked bar chart: pure numbers from the layer summaries, no DOM, so the
// scale is easy to check.
import type { LayerSummary } from '../../engine/server/protocol';

export const GROUPS = ['attention', 'ffn', 'norm', 'other'] as const;
export type Group = (typeof GROUPS)[number];

export const GROUP_LABELS: Record<Group, string> = {
  attention: 'Attention',
  ffn: 'FFN',
  norm: 'Norm',
  other: 'Other',
};

export function groupBytes(layer: LayerSummary, group: Group): number {
  switch (group) {
    case 'attention': return layer.attentionBytes;
    case 'ffn': return layer.ffnBytes;
    case 'norm': return layer.normBytes;
    case 'other': return layer.otherBytes;
  }
}

export interface Segment { group: Group; bytes: number; x: number; width: number }
export interface Bar { layer: LayerSummary; y: number; segments: Segment[]; totalWidth: number }

export interface ChartLayout {
  width: number;
  height: number;
  labelWidth: number;
  barAreaWidth: number;
  rowHeight: number;
  barHeight: number;
  top: number;
  /** SVG units per byte; the widest bar spans barAreaWidth. */
  unitsPerByte: number;
  maxBytes: number;
  bars: Bar[];
  ticks: { x: number; bytes: number }[];
}

/** A step of 1, 2 or 5 × 2^(10k) × 10^j bytes giving at most 5 intervals up to maxBytes. */
export function tickStep(maxBytes: number): number {
  if (!(maxBytes > 0)) return 0;
  const unit = 1024 ** Math.min(4, Math.max(0, Math.floor(Math.log(maxBytes) / Math.log(1024))));
  const inUnits = maxBytes / unit;
  for (let decade = 10 ** Math.floor(Math.log10(inUnits / 5)); ; decade *= 10) {
    for (const m of [1, 2, 5]) {
      const step = m * decade;
      if (inUnits / step <= 5) return step * unit;
    }
  }
}

export function layoutChart(layers: LayerSummary[], barAreaWidth = 640, labelWidth = 140): ChartLayout {
  const rowHeight = 22;
  const barHeight = 16;
  const top = 26;
  const maxBytes = Math.max(0, ...layers.map((l) => GROUPS.reduce((s, g) => s + groupBytes(l, g), 0)));
  // The axis ends at a round multiple of a round step, so tick labels read 64 KiB, not 64.1 KiB.
  const step = tickStep(maxBytes);
  const axisBytes = step > 0 ? Math.ceil(maxBytes / step) * step : 0;
  const unitsPerByte = axisBytes > 0 ? barAreaWidth / axisBytes : 0;
  const bars = layers.map((layer, i): Bar => {
    let x = labelWidth;
    const segments = GROUPS.map((group): Segment => {
      const bytes = groupBytes(layer, group);
      const seg = { group, bytes, x, width: bytes * unitsPerByte };
      x += seg.width;
      return seg;
    });
    return { layer, y: top + i * rowHeight + (rowHeight - barHeight) / 2, segments, totalWidth: x - labelWidth };
  });
  const ticks: { x: number; bytes: number }[] = [];
  for (let b = 0; step > 0 && b <= axisBytes + step / 2; b += step) ticks.push({ x: labelWidth + b * unitsPerByte, bytes: b });
  if (ticks.length === 0) ticks.push({ x: labelWidth, bytes: 0 });
  return {
    width: labelWidth + barAreaWidth + 40, // room for the last tick label
    height: top + layers.length * rowHeight + 4,
    labelWidth, barAreaWidth, rowHeight, barHeight, top, unitsPerByte, maxBytes, bars, ticks,
  };
}

/** Bytes for people: 1023 B, 1.5 KiB, 12.3 MiB, 4.00 GiB. */
export function formatBytes(bytes: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) { value /= 1024; unit++; }
  if (unit === 0) return `${value} B`;
  return `${value.toFixed(value < 10 ? 2 : value < 100 ? 1 : 0)} ${units[unit]}`;
}
