// Not a unit test: a command the Python tests run (tests/ts_replay.py) to put real server notifications through the
// real BuildTreeModel. `node out/test/replay.js notifications.json` prints, for each notification in turn, the
// phases the model holds for that build, and at the end every row of the tree as the VS Code view would show it.
import * as fs from 'node:fs';
import { BuildTreeModel, TreeElement } from '../src/buildTree';

interface Row { depth: number; label: string; description: string; tooltip: string; kind: string; id: string }

function rows(model: BuildTreeModel, el: TreeElement | undefined, depth: number, out: Row[]): void {
  for (const child of model.children(el)) {
    const v = model.view(child);
    if (v === undefined) continue;
    const id = child.kind === 'phase' ? child.phaseId : child.buildId;
    out.push({ depth, label: v.label, description: v.description, tooltip: v.tooltip, kind: child.kind, id });
    rows(model, child, depth + 1, out);
  }
}

const notifications = JSON.parse(fs.readFileSync(process.argv[2]!, 'utf8')) as unknown[];
const model = new BuildTreeModel();
const held: unknown[] = [];
for (const n of notifications) {
  const b = model.update(n);
  held.push(b === undefined ? null : b.phases);
}
const tree: Row[] = [];
rows(model, undefined, 0, tree);
process.stdout.write(JSON.stringify({ held, tree }));
