// No circle of imports among the engine's files (issue 22 item 3): a circle makes a change in
// one room ripple back into itself (the profiler once ran the runtime's benchmark, which loaded
// the engine, which fetched a profile from the profiler). Type-only imports count too: they are
// arrows of the structure even where they vanish at run time.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { repoRoot } from '../helpers/shared';

const IMPORT = /(?:^|\n)\s*(?:import|export)\s+(?:type\s+)?[^'";]*?from\s+'([^']+)'|import\(\s*'([^']+)'\s*\)/g;

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = path.join(dir, name);
    return statSync(p).isDirectory() ? sources(p) : name.endsWith('.ts') ? [p] : [];
  });
}

/** Each file's relative imports, resolved to files. */
function importGraph(root: string): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const file of sources(root)) {
    const deps: string[] = [];
    for (const m of readFileSync(file, 'utf8').matchAll(IMPORT)) {
      const spec = m[1] ?? m[2]!;
      if (!spec.startsWith('.')) continue;
      const base = path.resolve(path.dirname(file), spec);
      const target = [`${base}.ts`, path.join(base, 'index.ts')].find((c) => existsSync(c));
      if (target) deps.push(target);
    }
    graph.set(file, deps);
  }
  return graph;
}

/** Strongly connected components of more than one file (Tarjan). */
function circles(graph: Map<string, string[]>): string[][] {
  let counter = 0;
  const index = new Map<string, number>(), low = new Map<string, number>(), stack: string[] = [], onStack = new Set<string>();
  const out: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, counter); low.set(v, counter); counter++;
    stack.push(v); onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) { visit(w); low.set(v, Math.min(low.get(v)!, low.get(w)!)); } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) === index.get(v)) {
      const component: string[] = [];
      let w: string;
      do { w = stack.pop()!; onStack.delete(w); component.push(w); } while (w !== v);
      if (component.length > 1) out.push(component);
    }
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return out;
}

test('the engine\'s files import each other without a circle', () => {
  const root = path.join(repoRoot, 'engine');
  const graph = importGraph(root);
  assert.ok(graph.size > 100, 'the engine\'s sources were found');
  const found = circles(graph).map((c) => c.map((f) => path.relative(root, f)).sort().join(' → '));
  assert.deepEqual(found, []);
});

test('the circle finder finds a circle', () => {
  const g = new Map([['a', ['b']], ['b', ['c']], ['c', ['a']], ['d', ['a']]]);
  assert.deepEqual(circles(g).map((c) => c.sort()), [['a', 'b', 'c']]);
});

/** Pairs of the engine's rooms (its top-level folders) that import each other both ways. */
function roomsBothWays(graph: Map<string, string[]>, root: string): string[] {
  const room = (f: string): string => path.relative(root, f).split(path.sep)[0]!;
  const arrows = new Set<string>();
  for (const [from, deps] of graph) for (const to of deps) if (room(from) !== room(to)) arrows.add(`${room(from)}→${room(to)}`);
  return [...arrows].filter((a) => { const [x, y] = a.split('→'); return x! < y! && arrows.has(`${y}→${x}`); }).sort();
}

test('the engine\'s rooms stand on each other one way (issue 22 item 6): no two folders import each other', () => {
  const root = path.join(repoRoot, 'engine');
  const graph = importGraph(root);
  assert.deepEqual(roomsBothWays(graph, root), []);
  // The finder sees such a pair.
  const g = new Map([[path.join(root, 'a', 'x.ts'), [path.join(root, 'b', 'y.ts')]], [path.join(root, 'b', 'y.ts'), [path.join(root, 'a', 'z.ts')]]]);
  assert.deepEqual(roomsBothWays(g, root), ['a→b']);
});

/**
 * The rooms of `dir` as a graph: a room is a top-level folder or file of `dir`, and a file
 * `x.ts` beside a folder `x/` is one room with it (a policy's module and its helpers, e.g.
 * lia.ts and lia/), so an arrow between them is inside the room, not between two.
 */
function roomGraph(graph: Map<string, string[]>, dir: string): Map<string, string[]> {
  const room = (f: string): string | undefined => {
    const rel = path.relative(dir, f);
    return rel.startsWith('..') ? undefined : rel.split(path.sep)[0]!.replace(/\.ts$/, '');
  };
  const rooms = new Map<string, Set<string>>();
  for (const [from, deps] of graph) {
    const a = room(from);
    if (a === undefined) continue;
    if (!rooms.has(a)) rooms.set(a, new Set());
    for (const to of deps) { const b = room(to); if (b !== undefined && b !== a) rooms.get(a)!.add(b); }
  }
  return new Map([...rooms].map(([k, v]) => [k, [...v]]));
}

test('the planner\'s rooms stand on each other one way (issue 22 item 6): no circle among engine/plan\'s folders and files', () => {
  const dir = path.join(repoRoot, 'engine', 'plan');
  const rooms = roomGraph(importGraph(path.join(repoRoot, 'engine')), dir);
  assert.ok(['online', 'neo', 'apex', 'sim', 'policy', 'multihost'].every((r) => rooms.has(r)), 'the planner\'s rooms were found');
  assert.deepEqual(circles(rooms).map((c) => c.sort().join(' ⇄ ')), []);
  // A file and its same-named folder are one room; a circle through two rooms is seen.
  const g = new Map([[path.join(dir, 'x.ts'), [path.join(dir, 'x', 'a.ts')]], [path.join(dir, 'x', 'a.ts'), [path.join(dir, 'y', 'b.ts')]], [path.join(dir, 'y', 'b.ts'), [path.join(dir, 'x.ts')]]]);
  assert.deepEqual(circles(roomGraph(g, dir)).map((c) => c.sort()), [['x', 'y']]);
});
