// Geometry of the stacked bar chart: pure numbers from the layer summaries, no DOM, so the
// scale is easy to check.
import type { LayerSummary } from '../../engine/runtime/types';

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

export function layoutChart(layers: LayerSummary[], barAreaWidth = 640, labelWidth = 140): ChartLayout {
  const rowHeight = 22;
  const barHeight = 16;
  const top = 26;
  const maxBytes = Math.max(0, ...layers.map((l) => GROUPS.reduce((s, g) => s + groupBytes(l, g), 0)));
  const unitsPerByte = maxBytes > 0 ? barAreaWidth / maxBytes : 0;
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
  const ticks = [0, 0.25, 0.5, 0.75, 1].map((f) => ({ x: labelWidth + f * barAreaWidth, bytes: f * maxBytes }));
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
